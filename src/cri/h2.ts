// One HTTP/2 client connection (RFC 9113) over a unix socket or TCP without TLS (h2c), as much as
// gRPC calls need: requests with a small body, responses of headers, data and trailers, flow
// control both ways, SETTINGS, PING, RST_STREAM and GOAWAY. No server push, no priorities.
// Written for the CRI client's hot path: node:http2 in Bun wraps every stream in a Node stream
// with its events, which cost ~3 times the CPU of the whole call here.
//
// Invariants:
// - Every header block is decoded, even of a stream that is gone, so that the HPACK table stays
//   in step with the server's.
// - Every stream ends exactly once for its handler: with END_STREAM (onEnd), a reset (onReset) or
//   the connection going away (onLost); after that it gets nothing more.
// - Frames written in one turn of the event loop go out in one write.

import type { Socket, SocketHandler } from "bun";
import {
  DEFAULT_WINDOW,
  EMPTY_DONE,
  FLAG_ACK,
  FLAG_END_HEADERS,
  FLAG_END_STREAM,
  FLAG_PADDED,
  FLAG_PRIORITY,
  FRAME_CONTINUATION,
  FRAME_DATA,
  FRAME_GOAWAY,
  FRAME_HEADERS,
  FRAME_PING,
  FRAME_PUSH_PROMISE,
  FRAME_RST_STREAM,
  FRAME_SETTINGS,
  FRAME_WINDOW_UPDATE,
  frame,
  H2_CANCEL,
  MAX_FRAME,
  MAX_STREAM_ID,
  PREFACE,
  SETTINGS_ENABLE_PUSH,
  SETTINGS_INITIAL_WINDOW_SIZE,
  SETTINGS_MAX_FRAME_SIZE,
  unpad,
  windowUpdate,
} from "./h2-frame.ts";
import { HpackDecoder, HpackError } from "./hpack.ts";

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

interface Stream {
  handler: StreamHandler;
  /** Request body not yet sent (flow control), and whether END_STREAM is still to send. */
  body: Buffer;
  sendWindow: number;
  /** Response bytes received and not yet given back with WINDOW_UPDATE. */
  unacked: number;
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

export class H2Connection {
  private socket: Socket | undefined;
  private readonly streams = new Map<number, Stream>();
  /** Frames waiting for the socket (before it opened, or while it is full). */
  private outbox: Buffer[] = [];
  private flushQueued = false;
  private nextId = 1;
  private closed = false;
  private goingAway = false;
  private readonly decoder = new HpackDecoder();
  private received: Buffer | undefined;
  /** A header block in CONTINUATION frames: its stream, fragments and END_STREAM. */
  private partial: { id: number; fragments: Buffer[]; endStream: boolean } | undefined;
  private sendWindow = DEFAULT_WINDOW;
  private peerInitialWindow = DEFAULT_WINDOW;
  private peerMaxFrame = MAX_FRAME;
  private unacked = 0;
  /** Why the connection closed, for streams opened after. */
  private closeReason = "";

  constructor(private readonly opts: H2ConnectionOptions) {
    const settings = Buffer.alloc(12);
    settings.writeUInt16BE(SETTINGS_ENABLE_PUSH, 0);
    settings.writeUInt32BE(0, 2);
    settings.writeUInt16BE(SETTINGS_INITIAL_WINDOW_SIZE, 6);
    settings.writeUInt32BE(opts.windowBytes, 8);
    this.queue(PREFACE);
    this.queue(frame(FRAME_SETTINGS, 0, 0, settings));
    if (opts.windowBytes > DEFAULT_WINDOW) {
      this.queue(windowUpdate(0, opts.windowBytes - DEFAULT_WINDOW));
    }
    this.connect(opts.address);
  }

  private connect(address: H2Address): void {
    const socket: SocketHandler<undefined> = {
      open: (s) => {
        if (this.closed) {
          s.terminate();
          return;
        }
        this.socket = s;
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

  /** Whether a new stream may be opened here. */
  get usable(): boolean {
    return !this.closed && !this.goingAway && this.nextId <= MAX_STREAM_ID;
  }

  /** Opens a stream: sends the header block (encodeHeaders(); it must not add to the server's
   * table, so that a block may be sent again as it is) and then `body` with END_STREAM. */
  request(block: Buffer, body: Buffer, handler: StreamHandler) {
    if (!this.usable) throw new Error(this.closeReason || "the connection is closing");
    if (block.length > this.peerMaxFrame) throw new Error("request headers too large");
    const id = this.nextId;
    this.nextId += 2;
    const stream: Stream = { handler, body, sendWindow: this.peerInitialWindow, unacked: 0 };
    this.streams.set(id, stream);
    this.queue(frame(FRAME_HEADERS, FLAG_END_HEADERS, id, block));
    this.sendBody(id, stream);
    return id;
  }

  /** Resets a stream we no longer want (RST_STREAM CANCEL); its handler hears nothing more. */
  cancel(id: number): void {
    if (!this.streams.delete(id)) return;
    const code = Buffer.alloc(4);
    code.writeUInt32BE(H2_CANCEL, 0);
    this.queue(frame(FRAME_RST_STREAM, 0, id, code));
    this.maybeFinishGoingAway();
  }

  /** Closes the connection; open streams are lost with `why`. */
  close(why = "the connection was closed"): void {
    this.lose(why);
  }

  private sendBody(id: number, stream: Stream): void {
    for (;;) {
      const size = Math.min(
        stream.body.length,
        this.peerMaxFrame,
        this.sendWindow,
        stream.sendWindow,
      );
      if (size <= 0 && stream.body.length > 0) return; // waits for WINDOW_UPDATE
      const chunk = stream.body.subarray(0, size);
      stream.body = stream.body.subarray(size);
      this.sendWindow -= size;
      stream.sendWindow -= size;
      const last = stream.body.length === 0;
      this.queue(frame(FRAME_DATA, last ? FLAG_END_STREAM : 0, id, chunk));
      if (last) {
        stream.body = EMPTY_DONE;
        return;
      }
    }
  }

  private queue(buf: Buffer): void {
    if (this.closed) return;
    this.outbox.push(buf);
    if (!this.flushQueued) {
      this.flushQueued = true;
      queueMicrotask(() => {
        this.flushQueued = false;
        this.flush();
      });
    }
  }

  private flush(): void {
    const s = this.socket;
    if (s === undefined || this.outbox.length === 0) return;
    const data = this.outbox.length === 1 ? (this.outbox[0] as Buffer) : Buffer.concat(this.outbox);
    const written = s.write(data);
    this.outbox = written < data.length ? [data.subarray(Math.max(0, written))] : [];
  }

  private receive(chunk: Buffer): void {
    let buf = this.received === undefined ? chunk : Buffer.concat([this.received, chunk]);
    this.received = undefined;
    try {
      while (buf.length >= 9) {
        const length = buf.readUIntBE(0, 3);
        if (length > MAX_FRAME) throw new Error(`the server sent a frame of ${length} bytes`);
        if (buf.length < 9 + length) break;
        const type = buf[3] as number;
        const flags = buf[4] as number;
        const id = buf.readUInt32BE(5) & MAX_STREAM_ID;
        this.onFrame(type, flags, id, buf.subarray(9, 9 + length));
        if (this.closed) return;
        buf = buf.subarray(9 + length);
      }
    } catch (err) {
      const what = err instanceof HpackError ? "header compression" : "protocol";
      this.lose(`HTTP/2 ${what} error from the server: ${(err as Error).message}`);
      return;
    }
    if (buf.length > 0) this.received = Buffer.from(buf);
  }

  private onFrame(type: number, flags: number, id: number, payload: Buffer): void {
    if (this.partial !== undefined && type !== FRAME_CONTINUATION) {
      throw new Error("a header block was interrupted");
    }
    switch (type) {
      case FRAME_DATA:
        this.onData(flags, id, payload);
        return;
      case FRAME_HEADERS:
        this.onHeaders(flags, id, payload);
        return;
      case FRAME_CONTINUATION: {
        const p = this.partial;
        if (p === undefined || p.id !== id) throw new Error("an unexpected CONTINUATION");
        p.fragments.push(Buffer.from(payload));
        if (flags & FLAG_END_HEADERS) {
          this.partial = undefined;
          this.headerBlock(id, Buffer.concat(p.fragments), p.endStream);
        }
        return;
      }
      case FRAME_RST_STREAM: {
        const stream = this.streams.get(id);
        if (stream === undefined) return;
        this.streams.delete(id);
        stream.handler.onReset(payload.length >= 4 ? payload.readUInt32BE(0) : 0);
        this.maybeFinishGoingAway();
        return;
      }
      case FRAME_SETTINGS:
        if (!(flags & FLAG_ACK)) this.onSettings(payload);
        return;
      case FRAME_PING:
        if (!(flags & FLAG_ACK)) this.queue(frame(FRAME_PING, FLAG_ACK, 0, Buffer.from(payload)));
        return;
      case FRAME_GOAWAY:
        this.onGoaway(payload);
        return;
      case FRAME_WINDOW_UPDATE:
        this.onWindowUpdate(id, payload);
        return;
      case FRAME_PUSH_PROMISE:
        throw new Error("the server pushed a stream though push is off");
      default:
        return; // PRIORITY and unknown types
    }
  }

  private onData(flags: number, id: number, payload: Buffer): void {
    // Flow control counts the whole frame, padding included.
    this.unacked += payload.length;
    if (this.unacked >= this.opts.windowBytes / 2) {
      this.queue(windowUpdate(0, this.unacked));
      this.unacked = 0;
    }
    const stream = this.streams.get(id);
    if (stream === undefined) return;
    const data = flags & FLAG_PADDED ? unpad(payload) : payload;
    const end = (flags & FLAG_END_STREAM) !== 0;
    stream.unacked += payload.length;
    if (!end && stream.unacked >= this.opts.windowBytes / 2) {
      this.queue(windowUpdate(id, stream.unacked));
      stream.unacked = 0;
    }
    if (data.length > 0) stream.handler.onData(data);
    if (end) this.end(id, stream);
  }

  private onHeaders(flags: number, id: number, payload: Buffer): void {
    let block = flags & FLAG_PADDED ? unpad(payload) : payload;
    if (flags & FLAG_PRIORITY) block = block.subarray(5);
    const endStream = (flags & FLAG_END_STREAM) !== 0;
    if (flags & FLAG_END_HEADERS) this.headerBlock(id, block, endStream);
    else this.partial = { id, fragments: [Buffer.from(block)], endStream };
  }

  private headerBlock(id: number, block: Buffer, endStream: boolean): void {
    const fields = this.decoder.decode(block);
    const stream = this.streams.get(id);
    if (stream === undefined) return;
    stream.handler.onHeaders(fields);
    if (endStream && this.streams.get(id) === stream) this.end(id, stream);
  }

  private end(id: number, stream: Stream): void {
    this.streams.delete(id);
    stream.handler.onEnd();
    this.maybeFinishGoingAway();
  }

  private onSettings(payload: Buffer): void {
    for (let at = 0; at + 6 <= payload.length; at += 6) {
      const key = payload.readUInt16BE(at);
      const value = payload.readUInt32BE(at + 2);
      if (key === SETTINGS_INITIAL_WINDOW_SIZE) {
        const delta = value - this.peerInitialWindow;
        this.peerInitialWindow = value;
        for (const s of this.streams.values()) s.sendWindow += delta;
      } else if (key === SETTINGS_MAX_FRAME_SIZE) {
        this.peerMaxFrame = value;
      }
      // SETTINGS_HEADER_TABLE_SIZE limits the server's decoder table, which we never add to.
    }
    this.queue(frame(FRAME_SETTINGS, FLAG_ACK, 0, Buffer.alloc(0)));
    this.resumeBodies();
  }

  private onWindowUpdate(id: number, payload: Buffer): void {
    const increment = payload.readUInt32BE(0) & MAX_STREAM_ID;
    if (id === 0) this.sendWindow += increment;
    else {
      const stream = this.streams.get(id);
      if (stream !== undefined) stream.sendWindow += increment;
    }
    this.resumeBodies();
  }

  private resumeBodies(): void {
    for (const [id, stream] of this.streams) {
      if (stream.body.length > 0) this.sendBody(id, stream);
    }
  }

  private onGoaway(payload: Buffer): void {
    const last = payload.readUInt32BE(0) & MAX_STREAM_ID;
    this.goAway("the server closed the connection (GOAWAY)");
    for (const [id, stream] of [...this.streams]) {
      if (id <= last) continue;
      this.streams.delete(id);
      stream.handler.onLost("the server refused the stream while closing the connection");
    }
    this.maybeFinishGoingAway();
  }

  private goAway(why: string): void {
    if (this.goingAway) return;
    this.goingAway = true;
    this.closeReason = why;
  }

  private maybeFinishGoingAway(): void {
    if (this.goingAway && !this.closed && this.streams.size === 0) this.lose(this.closeReason);
  }

  private lose(why: string): void {
    if (this.closed) return;
    this.goAway(why);
    this.closed = true;
    this.closeReason = why;
    this.outbox = [];
    this.socket?.terminate();
    this.socket = undefined;
    const lost = [...this.streams.values()];
    this.streams.clear();
    for (const s of lost) s.handler.onLost(why);
  }
}
