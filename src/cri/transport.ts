// Unary gRPC over HTTP/2 on a unix socket: what the CRI client needs and nothing more. Every CRI
// call the agent makes is unary, and the agent makes two of them every second (the PLEG relist),
// so the per-call path is kept short: one HTTP/2 stream (h2.ts), the request frame written at
// once, the response collected and framed once. A full gRPC stack (resolvers, load balancing,
// interceptors, filters, channelz) cost the agent about one more point of a core at 110 pods
// (scripts/bench/README.md, agent-scale), and node:http2's streams about 100 us of CPU a call.
//
// Invariants:
// - Every call settles exactly once: with the one response message, or a TransportError carrying
//   a gRPC status code.
// - Calls never wait for the runtime: when the socket cannot be reached the call fails at once
//   with UNAVAILABLE, and the next call connects again (connecting to a local socket is cheap).
// - One HTTP/2 session at a time is shared by all calls; it is dropped on error, close or GOAWAY
//   (calls already on it finish or fail there) and replaced on the next call.
// - The session never keeps the process alive by itself; a call in flight does, through its
//   deadline timer.

import { GrpcStatus } from "./errors.ts";
import { H2Connection, type StreamHandler } from "./h2.ts";
import { H2_CANCEL, H2_ENHANCE_YOUR_CALM, H2_REFUSED_STREAM } from "./h2-frame.ts";
import { encodeHeaders } from "./hpack.ts";

export interface UnaryTransportOptions {
  /** Absolute path of the unix socket. */
  socketPath: string;
  /** Largest response message accepted (bytes). */
  maxReceiveBytes: number;
  /** HTTP/2 flow-control window for the session and each stream (bytes). */
  windowBytes: number;
}

export interface UnaryTransport {
  /** Sends one message to `path` ("/runtime.v1.RuntimeService/ListContainers") and resolves with
   * the response message, or rejects with a TransportError. */
  call(path: string, message: Uint8Array, timeoutMs: number, signal?: AbortSignal): Promise<Buffer>;
  /** Closes the session; calls in flight fail with CANCELLED. */
  close(): void;
}

/** A call that failed, with its gRPC status code and the runtime's (or our) message. */
export class TransportError extends Error {
  override readonly name = "TransportError";
  constructor(
    readonly code: number,
    readonly details: string,
    options?: { cause?: unknown },
  ) {
    super(details, options);
  }
}

/** The gRPC status of an HTTP response that carries none (the gRPC HTTP/2 mapping). */
export function statusOfHttp(httpStatus: number): number {
  switch (httpStatus) {
    case 400:
      return GrpcStatus.INTERNAL;
    case 401:
      return GrpcStatus.UNAUTHENTICATED;
    case 403:
      return GrpcStatus.PERMISSION_DENIED;
    case 404:
      return GrpcStatus.UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
      return GrpcStatus.UNAVAILABLE;
    default:
      return GrpcStatus.UNKNOWN;
  }
}

/** The gRPC status of a stream the peer reset. */
export function statusOfReset(rstCode: number): number {
  switch (rstCode) {
    case H2_REFUSED_STREAM:
      return GrpcStatus.UNAVAILABLE;
    case H2_CANCEL:
      return GrpcStatus.CANCELLED;
    case H2_ENHANCE_YOUR_CALM:
      return GrpcStatus.RESOURCE_EXHAUSTED;
    default:
      return GrpcStatus.INTERNAL;
  }
}

/** The `grpc-timeout` header value for a deadline: at most 8 digits, as the protocol says. */
export function grpcTimeout(ms: number): string {
  const whole = Math.max(0, Math.ceil(ms));
  if (whole < 1e8) return `${whole}m`;
  const seconds = Math.ceil(whole / 1000);
  return seconds < 1e8 ? `${seconds}S` : `${Math.ceil(seconds / 3600)}H`;
}

/** `grpc-message` is percent-encoded; a value that does not decode is shown as sent. */
export function decodeGrpcMessage(raw: unknown): string {
  const text = Array.isArray(raw) ? raw.join(", ") : typeof raw === "string" ? raw : "";
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** The one message in a unary response body (5-byte gRPC frame header + message), or a
 * TransportError describing what is wrong with it. */
export function unframe(body: Buffer): Buffer | TransportError {
  if (body.length < 5) {
    const what = body.length === 0 ? "no response message" : "a truncated message header";
    return new TransportError(GrpcStatus.INTERNAL, `the runtime sent ${what}`);
  }
  if (body[0] !== 0) {
    return new TransportError(
      GrpcStatus.INTERNAL,
      "the runtime sent a compressed message though no compression was offered",
    );
  }
  const length = body.readUInt32BE(1);
  if (body.length !== 5 + length) {
    const problem = body.length < 5 + length ? "shorter than its header says" : "more than one";
    return new TransportError(
      GrpcStatus.INTERNAL,
      `the runtime's response is not one whole message (${problem})`,
    );
  }
  return body.subarray(5);
}

function frame(message: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + message.length);
  out[0] = 0;
  out.writeUInt32BE(message.length, 1);
  out.set(message, 5);
  return out;
}

/** The request header block of a call; the same for every call of one RPC and deadline, so
 * the blocks are kept (a few dozen: RPCs times the deadlines the client gives them). */
const headerBlocks = new Map<string, Buffer>();

function requestHeaders(path: string, timeout: string): Buffer {
  const key = `${path} ${timeout}`;
  let block = headerBlocks.get(key);
  if (block === undefined) {
    if (headerBlocks.size >= 512) headerBlocks.clear();
    block = encodeHeaders([
      [":method", "POST"],
      [":scheme", "http"],
      [":path", path],
      [":authority", "localhost"],
      ["content-type", "application/grpc"],
      ["te", "trailers"],
      ["grpc-timeout", timeout],
    ]);
    headerBlocks.set(key, block);
  }
  return block;
}

export function createUnaryTransport(options: UnaryTransportOptions): UnaryTransport {
  let connection: H2Connection | undefined;
  let closed = false;
  const inflight = new Set<(err: TransportError) => void>();

  function currentConnection(): H2Connection {
    if (connection?.usable) return connection;
    connection = new H2Connection({
      socketPath: options.socketPath,
      windowBytes: options.windowBytes,
    });
    return connection;
  }

  function call(
    path: string,
    message: Uint8Array,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<Buffer> {
    return new Promise<Buffer>((resolve, reject) => {
      if (closed) return reject(new TransportError(GrpcStatus.CANCELLED, "the client is closed"));
      let settled = false;
      let httpStatus = 0;
      let status: number | undefined;
      let details = "";
      const chunks: Buffer[] = [];
      let received = 0;
      let conn: H2Connection | undefined;
      let id = 0;
      let timer: ReturnType<typeof setTimeout> | undefined;

      const finish = (result: Buffer | TransportError) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        inflight.delete(finish);
        if (result instanceof TransportError) {
          conn?.cancel(id);
          reject(result);
        } else {
          resolve(result);
        }
      };
      const onAbort = () =>
        finish(new TransportError(GrpcStatus.CANCELLED, "cancelled by the caller"));

      /** The stream ended (rstCode: reset by the server): the call's outcome. */
      const complete = (rstCode?: number) => {
        if (status === undefined) {
          if (httpStatus !== 0 && httpStatus !== 200) {
            return finish(
              new TransportError(
                statusOfHttp(httpStatus),
                `the runtime answered HTTP ${httpStatus}`,
              ),
            );
          }
          if (rstCode !== undefined && rstCode !== 0) {
            return finish(
              new TransportError(
                statusOfReset(rstCode),
                `the runtime closed the stream without answering (HTTP/2 code ${rstCode})`,
              ),
            );
          }
          if (httpStatus === 0) {
            return finish(
              new TransportError(
                GrpcStatus.UNAVAILABLE,
                "the runtime closed the stream without answering",
              ),
            );
          }
          return finish(
            new TransportError(GrpcStatus.UNKNOWN, "no status received from the runtime"),
          );
        }
        if (status !== GrpcStatus.OK) return finish(new TransportError(status, details));
        finish(unframe(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks)));
      };

      const handler: StreamHandler = {
        onHeaders(fields) {
          for (const [name, value] of fields) {
            if (name === ":status") httpStatus = Number(value);
            else if (name === "grpc-status") {
              const code = Number(value);
              status = Number.isInteger(code) && code >= 0 ? code : GrpcStatus.UNKNOWN;
            } else if (name === "grpc-message") details = decodeGrpcMessage(value);
          }
        },
        onData(chunk) {
          received += chunk.length;
          if (received > options.maxReceiveBytes + 5) {
            finish(
              new TransportError(
                GrpcStatus.RESOURCE_EXHAUSTED,
                `response larger than the limit of ${options.maxReceiveBytes} bytes`,
              ),
            );
            return;
          }
          chunks.push(chunk);
        },
        onEnd: () => complete(),
        onReset: (code) => complete(code),
        onLost: (why) => finish(new TransportError(GrpcStatus.UNAVAILABLE, why)),
      };

      try {
        conn = currentConnection();
        id = conn.request(requestHeaders(path, grpcTimeout(timeoutMs)), frame(message), handler);
      } catch (cause) {
        const detail = cause instanceof Error ? cause.message : String(cause);
        return reject(new TransportError(GrpcStatus.UNAVAILABLE, detail, { cause }));
      }
      timer = setTimeout(
        () => finish(new TransportError(GrpcStatus.DEADLINE_EXCEEDED, "deadline exceeded")),
        timeoutMs,
      );
      inflight.add(finish);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  return {
    call,
    close() {
      if (closed) return;
      closed = true;
      for (const fail of [...inflight]) {
        fail(new TransportError(GrpcStatus.CANCELLED, "the client is closed"));
      }
      connection?.close("the client is closed");
      connection = undefined;
    },
  };
}
