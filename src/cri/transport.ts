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
// - What the server can make a call hold is bounded: one message of maxReceiveBytes at a time,
//   a header block of maxHeaderListBytes, and a unary call ends at its second message.
// - A server that breaks HTTP/2 fails the call with INTERNAL (its connection is closed); a server
//   that cannot be reached or goes away, with UNAVAILABLE.

import { GrpcStatus } from "./errors.ts";
import {
  decodeGrpcMessage,
  frameMessage,
  frameMessages,
  type GrpcTransport,
  type GrpcTransportOptions,
  grpcTimeout,
  MessageReader,
  type ServerStreamHandler,
  statusOfHttp,
  statusOfReset,
  TransportError,
} from "./grpc-wire.ts";
import { H2Connection, type H2Request, type StreamHandler } from "./h2.ts";
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

/** Hands a unary call's one message to `resolve`; a second message, or none, is an error. */
function unarySink(
  resolve: (m: Buffer) => void,
  reject: (e: TransportError) => void,
): ServerStreamHandler {
  let result: Buffer | undefined;
  return {
    onMessage(m) {
      if (result !== undefined) {
        throw new TransportError(
          GrpcStatus.INTERNAL,
          "the server's response is not one whole message (more than one)",
        );
      }
      result = m;
    },
    onEnd(error) {
      if (error) return reject(error);
      if (result !== undefined) return resolve(result);
      reject(new TransportError(GrpcStatus.INTERNAL, "the server sent no response message"));
    },
  };
}

class H2Transport implements GrpcTransport {
  private connection: H2Connection | undefined;
  private closed = false;
  /** How to fail each call and stream in flight (close()). */
  readonly inflight = new Set<(err: TransportError) => void>();
  /** Request header blocks by path and deadline: the same for every call of one RPC and
   * deadline, so they are kept (a few dozen: RPCs times the deadlines the client gives). */
  private readonly headerBlocks = new Map<string, Buffer>();

  constructor(readonly options: GrpcTransportOptions) {}

  call(path: string, message: Uint8Array, timeoutMs: number, signal?: AbortSignal) {
    return new Promise<Buffer>((resolve, reject) => {
      this.open(path, frameMessage(message), timeoutMs, signal, unarySink(resolve, reject));
    });
  }

  serverStream(
    path: string,
    message: Uint8Array,
    handler: ServerStreamHandler,
    signal?: AbortSignal,
  ): void {
    this.open(path, frameMessage(message), undefined, signal, handler);
  }

  sendAll(
    path: string,
    messages: readonly Uint8Array[],
    handler: ServerStreamHandler,
    signal?: AbortSignal,
  ): void {
    this.open(path, frameMessages(messages), undefined, signal, handler);
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
      maxHeaderListBytes: this.options.maxHeaderListBytes,
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
      for (const [name, value] of this.options.metadata ?? []) fields.push([name, value]);
      block = encodeHeaders(fields);
      this.headerBlocks.set(key, block);
    }
    return block;
  }

  /** Opens one call with its framed request `body`; `sink` gets its messages and, once, its end. */
  private open(
    path: string,
    body: Buffer,
    timeoutMs: number | undefined,
    signal: AbortSignal | undefined,
    sink: ServerStreamHandler,
  ): void {
    if (this.closed || signal?.aborted) {
      const why = this.closed ? "the client is closed" : "cancelled by the caller";
      sink.onEnd(new TransportError(GrpcStatus.CANCELLED, why));
      return;
    }
    const call = new Call(this, sink, signal);
    try {
      const conn = this.currentConnection();
      call.start(conn.request(this.requestHeaders(path, timeoutMs), body, call));
    } catch (cause) {
      const detail = cause instanceof Error ? cause.message : String(cause);
      sink.onEnd(new TransportError(GrpcStatus.UNAVAILABLE, detail, { cause }));
      return;
    }
    call.arm(timeoutMs);
  }
}

/** One call on its stream: reads the response headers, messages and trailers, and ends the
 * sink once, with OK or the error the stream, its deadline or its caller gave. */
class Call implements StreamHandler {
  private settled = false;
  private httpStatus = 0;
  private status: number | undefined;
  private details = "";
  private readonly reader: MessageReader;
  private request: H2Request | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly onAbort = () =>
    this.finish(new TransportError(GrpcStatus.CANCELLED, "cancelled by the caller"));
  private readonly fail = (err: TransportError) => this.finish(err);

  constructor(
    private readonly transport: H2Transport,
    private readonly sink: ServerStreamHandler,
    private readonly signal: AbortSignal | undefined,
  ) {
    this.reader = new MessageReader(transport.options.maxReceiveBytes);
  }

  /** The stream was opened (or queued) as `request`. */
  start(request: H2Request): void {
    this.request = request;
  }

  /** Starts the deadline and listens for the caller's abort. */
  arm(timeoutMs: number | undefined): void {
    if (this.settled) return;
    if (timeoutMs !== undefined) {
      this.timer = setTimeout(
        () => this.finish(new TransportError(GrpcStatus.DEADLINE_EXCEEDED, "deadline exceeded")),
        timeoutMs,
      );
    }
    this.transport.inflight.add(this.fail);
    this.signal?.addEventListener("abort", this.onAbort, { once: true });
  }

  private finish(error?: TransportError): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    this.signal?.removeEventListener("abort", this.onAbort);
    this.transport.inflight.delete(this.fail);
    if (error) this.request?.cancel();
    this.sink.onEnd(error);
  }

  /** The stream ended (rstCode: reset by the server): the call's outcome. */
  private complete(rstCode?: number): void {
    this.finish(this.outcome(rstCode));
  }

  /** undefined for OK, else the error the ended stream amounts to. */
  private outcome(rstCode?: number): TransportError | undefined {
    if (this.status === undefined) return endedWithout(this.httpStatus, rstCode);
    if (this.status !== GrpcStatus.OK) return new TransportError(this.status, this.details);
    const problem = this.reader.finish();
    if (problem === undefined) return undefined;
    return new TransportError(GrpcStatus.INTERNAL, `the server's message is ${problem}`);
  }

  onHeaders(fields: [string, string][]): void {
    for (const [name, value] of fields) {
      if (name === ":status") this.httpStatus = Number(value);
      else if (name === "grpc-status") {
        const code = Number(value);
        this.status = Number.isInteger(code) && code >= 0 ? code : GrpcStatus.UNKNOWN;
      } else if (name === "grpc-message") this.details = decodeGrpcMessage(value);
    }
  }

  onData(chunk: Buffer): void {
    if (this.settled) return;
    const messages = this.reader.push(chunk);
    if (messages instanceof TransportError) {
      this.finish(messages);
      return;
    }
    for (const m of messages) {
      const failed = this.deliver(m);
      if (failed !== undefined) this.finish(failed);
      if (this.settled) return;
    }
  }

  /** Hands one message to the sink; what it threw, as the call's error. */
  private deliver(m: Buffer): TransportError | undefined {
    try {
      this.sink.onMessage(m);
      return undefined;
    } catch (cause) {
      if (cause instanceof TransportError) return cause;
      const why = `the stream's reader failed: ${(cause as Error).message ?? cause}`;
      return new TransportError(GrpcStatus.INTERNAL, why, { cause });
    }
  }

  onEnd(): void {
    this.complete();
  }

  onReset(code: number): void {
    this.complete(code);
  }

  onLost(why: string, protocolError: boolean): void {
    this.finish(
      new TransportError(protocolError ? GrpcStatus.INTERNAL : GrpcStatus.UNAVAILABLE, why),
    );
  }
}
