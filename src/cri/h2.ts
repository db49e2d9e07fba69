// One HTTP/2 client connection (RFC 9113) over a unix socket or TCP without TLS (h2c), as much as
// gRPC calls need: requests with a small body, responses of headers, data and trailers, flow
// control both ways, SETTINGS, PING, RST_STREAM and GOAWAY (h2-session.ts). No server push, no
// priorities. Written for the CRI client's hot path: node:http2 in Bun wraps every stream in a
// Node stream with its events, which cost ~3 times the CPU of the whole call here.
//
// Invariants:
// - Every stream ends exactly once for its handler: with END_STREAM (onEnd), a reset (onReset) or
//   the connection going away (onLost); after that it gets nothing more.
// - A connection that got GOAWAY takes no new stream and closes once its last stream ended.
// - No more streams are open than the server's SETTINGS_MAX_CONCURRENT_STREAMS: a request past
//   it waits, in order, for a stream to end (or for its caller to cancel it).

import type { Socket, SocketHandler } from "bun";
import { newSendState, type SendState } from "./h2-flow.ts";
import { H2_CANCEL, MAX_STREAM_ID, PREFACE, SETTINGS_ENABLE_PUSH } from "./h2-frame.ts";
import { type H2Limits, H2Session } from "./h2-session.ts";

/** What happens to one stream, reported to its opener. */
export interface StreamHandler {
  /** A header block: the response headers, then the trailers. */
  onHeaders(fields: [string, string][]): void;
  onData(chunk: Buffer): void;
  /** The server ended the stream (END_STREAM). */
  onEnd(): void;
  /** The server reset the stream with `code`. */
  onReset(code: number): void;
  /** The connection closed or refused the stream before it ended; `protocolError`: the server
   * broke HTTP/2 (the connection was closed for it), rather than the socket closing. */
  onLost(why: string, protocolError: boolean): void;
}

/** One request, sent or waiting for a stream. */
interface Request {
  block: Buffer;
  body: Buffer;
  handler: StreamHandler;
  /** Its stream once opened; 0 while it waits. */
  id: number;
}

interface Stream extends SendState {
  handler: StreamHandler;
}

/** A request as its opener holds it. */
export interface H2Request {
  /** Drops the request: a waiting one is never sent, an open stream is reset (CANCEL); its
   * handler hears nothing more. */
  cancel(): void;
}

/** Where to connect: a unix socket, or a TCP host and port. */
export type H2Address = { unix: string } | { hostname: string; port: number };

/** "path" or "host:port" ("[::1]:port"), for messages. */
export function addressText(a: H2Address): string {
  if ("unix" in a) return a.unix;
  return `${a.hostname.includes(":") ? `[${a.hostname}]` : a.hostname}:${a.port}`;
}

export interface H2ConnectionOptions extends H2Limits {
  address: H2Address;
}

export class H2Connection extends H2Session<Stream> {
  protected readonly peerName = "server";
  private nextId = 1;
  private goingAway = false;
  /** Requests waiting for the server to allow another stream, oldest first. */
  private waiting: Request[] = [];

  constructor(opts: H2ConnectionOptions) {
    super(opts);
    this.queue(PREFACE);
    this.sendSettings([[SETTINGS_ENABLE_PUSH, 0]]);
    this.connect(opts.address);
  }

  /** Whether a new stream may be opened here. */
  get usable(): boolean {
    return !this.closed && !this.goingAway && this.nextId <= MAX_STREAM_ID;
  }

  /** Opens a stream, or queues it while the server's stream limit is reached: sends the header
   * block (encodeHeaders(); it must not add to the server's table, so that a block may be sent
   * again as it is) and then `body` with END_STREAM. */
  request(block: Buffer, body: Buffer, handler: StreamHandler): H2Request {
    if (!this.usable) throw new Error(this.closeReason || "the connection is closing");
    const req: Request = { block, body, handler, id: 0 };
    if (this.streams.size < this.peer.maxConcurrentStreams) this.open(req);
    else this.waiting.push(req);
    return { cancel: () => this.cancel(req) };
  }

  /** Closes the connection; open streams are lost with `why`. */
  close(why = "the connection was closed"): void {
    this.lose(why);
  }

  protected override lose(why: string, code?: number): void {
    if (this.closed) return;
    super.lose(why, code);
    const waiting = this.waiting;
    this.waiting = [];
    for (const req of waiting) req.handler.onLost(why, this.brokeProtocol(code));
  }

  private open(req: Request): void {
    const id = this.nextId;
    this.nextId += 2;
    req.id = id;
    const stream: Stream = {
      ...newSendState(this.peer.initialWindow, this.limits.windowBytes),
      handler: req.handler,
    };
    stream.pending.push(req.body);
    stream.endWith = true;
    this.streams.set(id, stream);
    this.queueHeaders(id, req.block, false);
    this.drain(id, stream);
  }

  private cancel(req: Request): void {
    if (req.id === 0) {
      this.waiting = this.waiting.filter((r) => r !== req);
      return;
    }
    if (!this.streams.delete(req.id)) return;
    this.queueReset(req.id, H2_CANCEL);
    this.streamGone();
  }

  /** A stream ended: a waiting request may take its place, or a closing connection close. */
  private streamGone(): void {
    this.openWaiting();
    if (this.goingAway && !this.closed && this.streams.size === 0) this.lose(this.closeReason);
  }

  private openWaiting(): void {
    while (
      this.waiting.length > 0 &&
      !this.closed &&
      !this.goingAway &&
      this.nextId <= MAX_STREAM_ID &&
      this.streams.size < this.peer.maxConcurrentStreams
    ) {
      this.open(this.waiting.shift() as Request);
    }
  }

  protected override onPeerSettings(): void {
    this.openWaiting();
  }

  protected isIdle(id: number): boolean {
    // Push is off, so the server opens no stream: even IDs are never ours to hear about.
    return id % 2 === 0 || id >= this.nextId;
  }

  private connect(address: H2Address): void {
    const socket: SocketHandler<undefined> = {
      open: (s) => {
        if (this.closed) {
          s.terminate();
          return;
        }
        this.socket = s as Socket<unknown>;
        s.unref();
        this.flush();
      },
      data: (_s, chunk) => this.receive(chunk),
      drain: () => this.flush(),
      close: () => this.lose("the connection to the server closed"),
      error: (_s, err) => this.lose(err.message),
      end: () => this.lose("the connection to the server closed"),
    };
    const connecting =
      "unix" in address
        ? Bun.connect({ unix: address.unix, socket })
        : Bun.connect({ hostname: address.hostname, port: address.port, socket });
    connecting.catch((err: NodeJS.ErrnoException) => {
      this.lose(`connect ${err.code ?? err.message} ${addressText(address)}`);
    });
  }

  protected onHeaderBlock(id: number, fields: [string, string][], end: boolean): void {
    const stream = this.streams.get(id);
    if (stream === undefined) return;
    stream.handler.onHeaders(fields);
    if (end && this.streams.get(id) === stream) this.end(id, stream);
  }

  protected onStreamData(id: number, stream: Stream, data: Buffer, end: boolean): void {
    if (data.length > 0) stream.handler.onData(data);
    if (end && this.streams.get(id) === stream) this.end(id, stream);
  }

  protected onStreamReset(_id: number, stream: Stream, code: number): void {
    stream.handler.onReset(code);
    this.streamGone();
  }

  protected onStreamLost(_id: number, stream: Stream, why: string, code?: number): void {
    stream.handler.onLost(why, this.brokeProtocol(code));
  }

  /** Whether a connection closed with `code` was closed for a server that broke HTTP/2 after it
   * had connected: before its SETTINGS, the connection was never made (a server that does not
   * speak HTTP/2 at all). */
  private brokeProtocol(code: number | undefined): boolean {
    return code !== undefined && this.settingsReceived;
  }

  protected onGoaway(lastId: number): void {
    if (!this.goingAway) {
      this.goingAway = true;
      this.closeReason = "the server closed the connection (GOAWAY)";
    }
    const refused = "the server refused the stream while closing the connection";
    for (const [id, stream] of [...this.streams]) {
      if (id <= lastId) continue;
      this.streams.delete(id);
      stream.handler.onLost(refused, false);
    }
    const waiting = this.waiting;
    this.waiting = [];
    for (const req of waiting) req.handler.onLost(refused, false);
    this.streamGone();
  }

  private end(id: number, stream: Stream): void {
    this.streams.delete(id);
    stream.handler.onEnd();
    this.streamGone();
  }
}
