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

import type { Socket, SocketHandler } from "bun";
import { H2_CANCEL, MAX_STREAM_ID, PREFACE, SETTINGS_ENABLE_PUSH } from "./h2-frame.ts";
import { H2Session, newSendState, type SendState } from "./h2-session.ts";

/** What happens to one stream, reported to its opener. */
export interface StreamHandler {
  /** A header block: the response headers, then the trailers. */
  onHeaders(fields: [string, string][]): void;
  onData(chunk: Buffer): void;
  /** The server ended the stream (END_STREAM). */
  onEnd(): void;
  /** The server reset the stream with `code`. */
  onReset(code: number): void;
  /** The connection closed or refused the stream before it ended. */
  onLost(why: string): void;
}

interface Stream extends SendState {
  handler: StreamHandler;
}

/** Where to connect: a unix socket, or a TCP host and port. */
export type H2Address = { unix: string } | { hostname: string; port: number };

/** "path" or "host:port" ("[::1]:port"), for messages. */
export function addressText(a: H2Address): string {
  if ("unix" in a) return a.unix;
  return `${a.hostname.includes(":") ? `[${a.hostname}]` : a.hostname}:${a.port}`;
}

export interface H2ConnectionOptions {
  address: H2Address;
  /** Our receive window for the connection and each stream (bytes). */
  windowBytes: number;
}

export class H2Connection extends H2Session<Stream> {
  protected readonly peerName = "server";
  private nextId = 1;
  private goingAway = false;

  constructor(opts: H2ConnectionOptions) {
    super(opts.windowBytes);
    this.queue(PREFACE);
    this.sendSettings([[SETTINGS_ENABLE_PUSH, 0]]);
    this.connect(opts.address);
  }

  /** Whether a new stream may be opened here. */
  get usable(): boolean {
    return !this.closed && !this.goingAway && this.nextId <= MAX_STREAM_ID;
  }

  /** Opens a stream: sends the header block (encodeHeaders(); it must not add to the server's
   * table, so that a block may be sent again as it is) and then `body` with END_STREAM. */
  request(block: Buffer, body: Buffer, handler: StreamHandler): number {
    if (!this.usable) throw new Error(this.closeReason || "the connection is closing");
    const id = this.nextId;
    this.nextId += 2;
    const stream: Stream = { ...newSendState(this.peerInitialWindow), handler };
    stream.pending.push(body);
    stream.endWith = true;
    this.streams.set(id, stream);
    this.queueHeaders(id, block, false);
    this.drain(id, stream);
    return id;
  }

  /** Resets a stream we no longer want (RST_STREAM CANCEL); its handler hears nothing more. */
  cancel(id: number): void {
    if (!this.streams.delete(id)) return;
    this.queueReset(id, H2_CANCEL);
    this.maybeFinishGoingAway();
  }

  /** Closes the connection; open streams are lost with `why`. */
  close(why = "the connection was closed"): void {
    this.lose(why);
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
    this.maybeFinishGoingAway();
  }

  protected onStreamLost(_id: number, stream: Stream, why: string): void {
    stream.handler.onLost(why);
  }

  protected onGoaway(lastId: number): void {
    if (!this.goingAway) {
      this.goingAway = true;
      this.closeReason = "the server closed the connection (GOAWAY)";
    }
    for (const [id, stream] of [...this.streams]) {
      if (id <= lastId) continue;
      this.streams.delete(id);
      stream.handler.onLost("the server refused the stream while closing the connection");
    }
    this.maybeFinishGoingAway();
  }

  private end(id: number, stream: Stream): void {
    this.streams.delete(id);
    stream.handler.onEnd();
    this.maybeFinishGoingAway();
  }

  private maybeFinishGoingAway(): void {
    if (this.goingAway && !this.closed && this.streams.size === 0) this.lose(this.closeReason);
  }
}
