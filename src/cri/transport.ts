// gRPC over our own HTTP/2 client (h2.ts), on a unix socket or TCP: unary calls and server
// streams, what the CRI client, the runtime's event stream and gRPC probes need. The agent makes two unary calls every
// second (the PLEG relist) and a few per started pod, so the per-call path is kept short: one
// HTTP/2 stream, the request frame written at once, the response deframed as it arrives. A full
// gRPC stack (resolvers, load balancing, interceptors, filters, channelz) over node:http2 cost
// about twice the CPU per call and more memory (docs/grpc-stack.md).
//
// Invariants:
// - Every unary call settles exactly once: with the one response message, or a TransportError
//   carrying a gRPC status code. Every server stream ends exactly once (handler.onEnd).
// - Calls never wait for the server: when it cannot be reached the call fails at once with
//   UNAVAILABLE, and the next call connects again (connecting to a local socket is cheap).
// - One HTTP/2 session at a time is shared by all calls; it is dropped on error, close or GOAWAY
//   (calls already on it finish or fail there) and replaced on the next call.
// - The session never keeps the process alive by itself; a unary call in flight does, through its
//   deadline timer. A server stream has no deadline and keeps nothing alive.

import { GrpcStatus } from "./errors.ts";
import {
  decodeGrpcMessage,
  frameMessage,
  type GrpcTransport,
  type GrpcTransportOptions,
  grpcTimeout,
  MessageReader,
  type ServerStreamHandler,
  statusOfHttp,
  statusOfReset,
  TransportError,
} from "./grpc-wire.ts";
import { H2Connection, type StreamHandler } from "./h2.ts";
import { encodeHeaders } from "./hpack.ts";

export function createH2Transport(options: GrpcTransportOptions): GrpcTransport {
  return new H2Transport(options);
}

/** The outcome of a stream that ended without an OK status and message(s). */
function endedWithout(httpStatus: number, rstCode: number | undefined): TransportError {
  if (httpStatus !== 0 && httpStatus !== 200) {
    return new TransportError(statusOfHttp(httpStatus), `the server answered HTTP ${httpStatus}`);
  }
  if (rstCode !== undefined && rstCode !== 0) {
    return new TransportError(
      statusOfReset(rstCode),
      `the server closed the stream without answering (HTTP/2 code ${rstCode})`,
    );
  }
  if (httpStatus === 0) {
    return new TransportError(
      GrpcStatus.UNAVAILABLE,
      "the server closed the stream without answering",
    );
  }
  return new TransportError(GrpcStatus.UNKNOWN, "no status received from the server");
}

class H2Transport implements GrpcTransport {
  private connection: H2Connection | undefined;
  private closed = false;
  /** How to fail each call and stream in flight (close()). */
  private readonly inflight = new Set<(err: TransportError) => void>();
  /** Request header blocks by path and deadline: the same for every call of one RPC and
   * deadline, so they are kept (a few dozen: RPCs times the deadlines the client gives). */
  private readonly headerBlocks = new Map<string, Buffer>();

  constructor(private readonly options: GrpcTransportOptions) {}

  call(path: string, message: Uint8Array, timeoutMs: number, signal?: AbortSignal) {
    return new Promise<Buffer>((resolve, reject) => {
      let result: Buffer | undefined;
      let count = 0;
      this.open(path, message, timeoutMs, signal, {
        onMessage(m) {
          count++;
          result = m;
        },
        onEnd(error) {
          if (error) return reject(error);
          if (count === 1) return resolve(result as Buffer);
          const why =
            count === 0
              ? "the server sent no response message"
              : "the server's response is not one whole message (more than one)";
          reject(new TransportError(GrpcStatus.INTERNAL, why));
        },
      });
    });
  }

  serverStream(
    path: string,
    message: Uint8Array,
    handler: ServerStreamHandler,
    signal?: AbortSignal,
  ): void {
    this.open(path, message, undefined, signal, handler);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const fail of [...this.inflight]) {
      fail(new TransportError(GrpcStatus.CANCELLED, "the client is closed"));
    }
    this.connection?.close("the client is closed");
    this.connection = undefined;
  }

  private currentConnection(): H2Connection {
    if (this.connection?.usable) return this.connection;
    this.connection = new H2Connection({
      address: this.options.address,
      windowBytes: this.options.windowBytes,
    });
    return this.connection;
  }

  private requestHeaders(path: string, timeoutMs: number | undefined): Buffer {
    const timeout = timeoutMs === undefined ? "" : grpcTimeout(timeoutMs);
    const key = `${path} ${timeout}`;
    let block = this.headerBlocks.get(key);
    if (block === undefined) {
      if (this.headerBlocks.size >= 512) this.headerBlocks.clear();
      const fields: [string, string][] = [
        [":method", "POST"],
        [":scheme", "http"],
        [":path", path],
        [":authority", this.options.authority ?? "localhost"],
        ["content-type", "application/grpc"],
        ["te", "trailers"],
      ];
      if (timeout !== "") fields.push(["grpc-timeout", timeout]);
      block = encodeHeaders(fields);
      this.headerBlocks.set(key, block);
    }
    return block;
  }

  /** Opens one call; `sink` gets its messages and, once, its end. */
  private open(
    path: string,
    message: Uint8Array,
    timeoutMs: number | undefined,
    signal: AbortSignal | undefined,
    sink: ServerStreamHandler,
  ): void {
    if (this.closed || signal?.aborted) {
      const why = this.closed ? "the client is closed" : "cancelled by the caller";
      sink.onEnd(new TransportError(GrpcStatus.CANCELLED, why));
      return;
    }
    let settled = false;
    let httpStatus = 0;
    let status: number | undefined;
    let details = "";
    const reader = new MessageReader(this.options.maxReceiveBytes);
    let conn: H2Connection | undefined;
    let id = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;

    const finish = (error?: TransportError) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      this.inflight.delete(finish);
      if (error) conn?.cancel(id);
      sink.onEnd(error);
    };
    const onAbort = () =>
      finish(new TransportError(GrpcStatus.CANCELLED, "cancelled by the caller"));

    /** The stream ended (rstCode: reset by the server): the call's outcome. */
    const complete = (rstCode?: number) => {
      if (status === undefined) return finish(endedWithout(httpStatus, rstCode));
      if (status !== GrpcStatus.OK) return finish(new TransportError(status, details));
      const problem = reader.finish();
      if (problem === undefined) return finish();
      finish(new TransportError(GrpcStatus.INTERNAL, `the server's message is ${problem}`));
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
        if (settled) return;
        const messages = reader.push(chunk);
        if (messages instanceof TransportError) return finish(messages);
        for (const m of messages) {
          try {
            sink.onMessage(m);
          } catch (cause) {
            const why = `the stream's reader failed: ${(cause as Error).message ?? cause}`;
            return finish(new TransportError(GrpcStatus.INTERNAL, why, { cause }));
          }
          if (settled) return;
        }
      },
      onEnd: () => complete(),
      onReset: (code) => complete(code),
      onLost: (why) => finish(new TransportError(GrpcStatus.UNAVAILABLE, why)),
    };

    try {
      conn = this.currentConnection();
      id = conn.request(this.requestHeaders(path, timeoutMs), frameMessage(message), handler);
    } catch (cause) {
      const detail = cause instanceof Error ? cause.message : String(cause);
      sink.onEnd(new TransportError(GrpcStatus.UNAVAILABLE, detail, { cause }));
      return;
    }
    if (timeoutMs !== undefined) {
      timer = setTimeout(
        () => finish(new TransportError(GrpcStatus.DEADLINE_EXCEEDED, "deadline exceeded")),
        timeoutMs,
      );
    }
    this.inflight.add(finish);
    signal?.addEventListener("abort", onAbort, { once: true });
  }
}
