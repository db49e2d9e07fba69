// A gRPC server on a unix socket, over our HTTP/2 server connection (h2-server.ts): unary and
// server-streaming methods registered by path, as a device plugin's registration service needs.
// One request message per call (no client streaming), no compression, no TLS.
//
// Invariants:
// - Every call ends once: with the handler's answer and status OK, with the status of the
//   GrpcError it threw (UNKNOWN for anything else), or silently when the client is gone.
// - A handler's signal aborts when the client cancels, the deadline (grpc-timeout) passes or
//   the server closes; the call then ends with CANCELLED or DEADLINE_EXCEEDED if it still can.
// - A request that is not gRPC gets an HTTP error; an unknown method UNIMPLEMENTED.

import { lstatSync, unlinkSync } from "node:fs";
import type { Socket } from "bun";
import { GrpcStatus } from "./errors.ts";
import {
  encodeGrpcMessage,
  frameMessage,
  LOCAL_PEER_HEADER_BYTES,
  MessageReader,
  parseGrpcTimeout,
  TransportError,
} from "./grpc-wire.ts";
import { H2ServerConnection, type H2ServerStream } from "./h2-server.ts";

/** Thrown by a handler to end its call with `code` (a GrpcStatus) and `message`. */
export class GrpcError extends Error {
  override readonly name = "GrpcError";
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

interface GrpcCallContext {
  /** Aborts when the client cancels, the deadline passes or the server closes. */
  signal: AbortSignal;
  /** The request's metadata: its header fields but HTTP/2's and gRPC's own. */
  metadata: ReadonlyMap<string, string>;
}

type UnaryMethod = (request: Buffer, ctx: GrpcCallContext) => Promise<Uint8Array> | Uint8Array;
/** Sends messages with `send` until it resolves (the stream then ends OK). */
type ServerStreamMethod = (
  request: Buffer,
  send: (message: Uint8Array) => void,
  ctx: GrpcCallContext,
) => Promise<void> | void;

export interface GrpcServerOptions {
  /** Absolute path of the unix socket; a stale socket there is replaced, any other file is
   * an error. */
  socketPath: string;
  /** Methods by path ("/pkg.Service/Method"). */
  unary?: Readonly<Record<string, UnaryMethod>>;
  serverStreams?: Readonly<Record<string, ServerStreamMethod>>;
  /** Largest request message accepted (bytes). Default 4 MiB. */
  maxReceiveBytes?: number;
  /** Largest request header block accepted (bytes). Default 1 MiB (LOCAL_PEER_HEADER_BYTES). */
  maxHeaderListBytes?: number;
  /** Calls one connection may have open at once. Default 100. */
  maxConcurrentStreams?: number;
  /** A handler failed with something other than a GrpcError (the call ends UNKNOWN). */
  onError?: (path: string, error: unknown) => void;
}

export interface GrpcServer {
  readonly socketPath: string;
  /** Stops accepting connections; calls in flight are cancelled, connections closed. */
  close(): void;
}

const ONE_MESSAGE = "a call takes exactly one request message";
const RESERVED = new Set(["content-type", "te", "user-agent", "grpc-timeout", "grpc-encoding"]);
const OK_HEADERS: [string, string][] = [
  [":status", "200"],
  ["content-type", "application/grpc"],
];

function status(code: number, message = ""): [string, string][] {
  const out: [string, string][] = [["grpc-status", String(code)]];
  if (message !== "") out.push(["grpc-message", encodeGrpcMessage(message)]);
  return out;
}

/** Starts serving; resolves once the socket listens. */
export async function startGrpcServer(opts: GrpcServerOptions): Promise<GrpcServer> {
  removeStaleSocket(opts.socketPath);
  const connections = new Set<H2ServerConnection>();
  const calls = new Set<AbortController>();
  const serve = (s: H2ServerStream) => serveCall(s, opts, calls);
  const listener = Bun.listen<H2ServerConnection | undefined>({
    unix: opts.socketPath,
    socket: {
      open(socket) {
        const c = new H2ServerConnection(socket as Socket<unknown>, {
          windowBytes: 1 << 20,
          maxHeaderListBytes: opts.maxHeaderListBytes ?? LOCAL_PEER_HEADER_BYTES,
          maxConcurrentStreams: opts.maxConcurrentStreams ?? 100,
          onStream: serve,
        });
        socket.data = c;
        connections.add(c);
      },
      data: (socket, chunk) => socket.data?.receive(chunk),
      drain: (socket) => socket.data?.drained(),
      close(socket) {
        const c = socket.data;
        if (c === undefined) return;
        connections.delete(c);
        c.closedBySocket("the connection to the client closed");
      },
      error: (socket, err) => socket.data?.closedBySocket(err.message),
    },
  });
  return {
    socketPath: opts.socketPath,
    close() {
      listener.stop(true);
      for (const call of [...calls]) call.abort(new GrpcError(GrpcStatus.CANCELLED, "closing"));
      for (const c of [...connections]) c.shutdown(true);
      connections.clear();
    },
  };
}

function removeStaleSocket(path: string): void {
  let isSocket: boolean;
  try {
    isSocket = lstatSync(path).isSocket();
  } catch {
    return; // nothing there
  }
  if (!isSocket)
    throw new Error(`Cannot serve gRPC on ${path}: a file that is not a socket is there`);
  unlinkSync(path);
}

/** Checks the request is gRPC and finds its method; answers it when not. */
function serveCall(s: H2ServerStream, opts: GrpcServerOptions, calls: Set<AbortController>) {
  const h = new Map(s.headers);
  if (h.get(":method") !== "POST") {
    s.respond([[":status", "405"]], true);
    return;
  }
  if (!(h.get("content-type") ?? "").startsWith("application/grpc")) {
    s.respond([[":status", "415"]], true);
    return;
  }
  const path = h.get(":path") ?? "";
  const unary = opts.unary?.[path];
  const stream = opts.serverStreams?.[path];
  if (unary === undefined && stream === undefined) {
    s.respond([...OK_HEADERS, ...status(GrpcStatus.UNIMPLEMENTED, `unknown method ${path}`)], true);
    return;
  }
  const call = new ServerCall(s, h, opts, calls);
  call.start((request, ctx) =>
    unary !== undefined
      ? Promise.resolve(unary(request, ctx)).then((answer) => call.send(answer))
      : Promise.resolve(stream?.(request, (m) => call.send(m), ctx)),
  );
}

/** One call between its request and its status. */
class ServerCall {
  private readonly abort = new AbortController();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private responded = false;
  private done = false;

  constructor(
    private readonly s: H2ServerStream,
    private readonly headers: Map<string, string>,
    private readonly opts: GrpcServerOptions,
    private readonly calls: Set<AbortController>,
  ) {}

  /** Reads the one request message, then runs `handle` with it. */
  start(handle: (request: Buffer, ctx: GrpcCallContext) => Promise<unknown>): void {
    this.calls.add(this.abort);
    const timeout = parseGrpcTimeout(this.headers.get("grpc-timeout") ?? "");
    if (timeout !== undefined) {
      this.timer = setTimeout(
        () => this.abort.abort(new GrpcError(GrpcStatus.DEADLINE_EXCEEDED, "deadline exceeded")),
        timeout,
      );
    }
    this.abort.signal.addEventListener("abort", () => this.aborted(), { once: true });
    const reader = new MessageReader(this.opts.maxReceiveBytes ?? 4 * 1024 * 1024);
    const messages: Buffer[] = [];
    this.s.onData = (chunk) => {
      if (this.done) return;
      const got = reader.push(chunk);
      if (got instanceof TransportError) return this.finish(got.code, got.details);
      messages.push(...got);
      if (messages.length > 1) this.finish(GrpcStatus.INTERNAL, ONE_MESSAGE);
    };
    this.s.onGone = () => {
      if (this.done) return;
      this.done = true;
      clearTimeout(this.timer);
      this.calls.delete(this.abort);
      this.abort.abort(new GrpcError(GrpcStatus.CANCELLED, "the client went away"));
    };
    this.s.onEnd = () => {
      if (this.done) return;
      if (messages.length !== 1 || reader.finish() !== undefined) {
        return this.finish(GrpcStatus.INTERNAL, ONE_MESSAGE);
      }
      const metadata = new Map(
        [...this.headers].filter(([k]) => !k.startsWith(":") && !RESERVED.has(k)),
      );
      let running: Promise<unknown>;
      try {
        running = handle(messages[0] as Buffer, { signal: this.abort.signal, metadata });
      } catch (err) {
        running = Promise.reject(err); // a handler that throws at once
      }
      running.then(
        () => this.finish(GrpcStatus.OK),
        (err) => this.failed(err),
      );
    };
  }

  /** Sends one response message. */
  send(message: Uint8Array): void {
    if (this.done) return;
    if (!this.responded) {
      this.responded = true;
      this.s.respond(OK_HEADERS);
    }
    this.s.write(frameMessage(message));
  }

  private failed(err: unknown): void {
    if (err instanceof GrpcError) {
      this.finish(err.code, err.message);
      return;
    }
    this.opts.onError?.(this.headers.get(":path") ?? "", err);
    this.finish(GrpcStatus.UNKNOWN, `the handler failed: ${(err as Error)?.message ?? err}`);
  }

  private aborted(): void {
    const reason = this.abort.signal.reason;
    if (reason instanceof GrpcError) this.finish(reason.code, reason.message);
  }

  private finish(code: number, message = ""): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    this.calls.delete(this.abort);
    if (code !== GrpcStatus.OK && !this.abort.signal.aborted) {
      this.abort.abort(new GrpcError(code, message));
    }
    if (this.responded) this.s.end(status(code, message));
    else this.s.respond([...OK_HEADERS, ...status(code, message)], true);
  }
}
