// What both ends of an HTTP/2 connection (RFC 9113) do alike, for the client (h2.ts) and the
// server (h2-server.ts): reading frames from the socket, header blocks (HPACK, CONTINUATION),
// SETTINGS, PING, WINDOW_UPDATE, and sending each stream's data within both flow-control windows,
// ending it with END_STREAM or a trailers block. What a stream means is left to the subclass.
//
// Invariants:
// - Every header block is decoded, even of a stream that is gone, so that the HPACK table stays
//   in step with the peer's.
// - A stream's data goes out in order, never past the peer's windows; its end (END_STREAM or
//   trailers) goes out after its last data.
// - Frames written in one turn of the event loop go out in one write.

import type { Socket } from "bun";
import {
  DEFAULT_WINDOW,
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
  MAX_FRAME,
  MAX_STREAM_ID,
  PREFACE,
  SETTINGS_INITIAL_WINDOW_SIZE,
  SETTINGS_MAX_FRAME_SIZE,
  unpad,
  windowUpdate,
} from "./h2-frame.ts";
import { HpackDecoder, HpackError } from "./hpack.ts";

/** Our sending side of one stream. */
export interface SendState {
  /** Data not yet sent (waiting for flow-control window). */
  pending: Buffer[];
  /** How our side ends once `pending` is sent: END_STREAM on the last DATA frame (true), a
   * trailers block, or not yet (undefined). */
  endWith: true | Buffer | undefined;
  /** Our side has ended (END_STREAM sent). */
  ended: boolean;
  /** What the peer lets us send on this stream. */
  sendWindow: number;
  /** Bytes received and not yet given back with WINDOW_UPDATE. */
  unacked: number;
}

export function newSendState(sendWindow: number): SendState {
  return { pending: [], endWith: undefined, ended: false, sendWindow, unacked: 0 };
}

export abstract class H2Session<S extends SendState> {
  protected socket: Socket<unknown> | undefined;
  protected readonly streams = new Map<number, S>();
  protected closed = false;
  /** Why the connection closed or is closing, for streams opened after. */
  protected closeReason = "";
  /** Bytes of the client's connection preface still to check (a server expects 24). */
  protected prefaceLeft = 0;
  protected peerInitialWindow = DEFAULT_WINDOW;
  protected peerMaxFrame = MAX_FRAME;
  /** Frames waiting for the socket (before it opened, or while it is full). */
  private outbox: Buffer[] = [];
  private flushQueued = false;
  private readonly decoder = new HpackDecoder();
  private received: Buffer | undefined;
  /** A header block in CONTINUATION frames: its stream, fragments and END_STREAM. */
  private partial: { id: number; fragments: Buffer[]; endStream: boolean } | undefined;
  private sendWindow = DEFAULT_WINDOW;
  private unacked = 0;

  /** `windowBytes`: our receive window for the connection and each stream. */
  constructor(protected readonly windowBytes: number) {}

  /** A header block arrived on stream `id` (which may be unknown: a new stream, or one gone). */
  protected abstract onHeaderBlock(id: number, fields: [string, string][], end: boolean): void;
  /** Data of a known stream; `end`: the peer ended the stream with it. */
  protected abstract onStreamData(id: number, stream: S, data: Buffer, end: boolean): void;
  /** The peer reset a known stream. */
  protected abstract onStreamReset(id: number, stream: S, code: number): void;
  /** The connection is gone; every stream still open hears `why`. */
  protected abstract onStreamLost(id: number, stream: S, why: string): void;
  /** The peer sent GOAWAY: streams above `lastId` were not processed. */
  protected abstract onGoaway(lastId: number): void;
  /** Our side of a stream ended (its END_STREAM was queued). */
  protected onLocalEnd(_id: number, _stream: S): void {}

  /** Queues our SETTINGS (`extra` besides our initial window) and the connection window. */
  protected sendSettings(extra: [number, number][]): void {
    const entries: [number, number][] = [
      ...extra,
      [SETTINGS_INITIAL_WINDOW_SIZE, this.windowBytes],
    ];
    const payload = Buffer.alloc(6 * entries.length);
    entries.forEach(([key, value], i) => {
      payload.writeUInt16BE(key, 6 * i);
      payload.writeUInt32BE(value, 6 * i + 2);
    });
    this.queue(frame(FRAME_SETTINGS, 0, 0, payload));
    if (this.windowBytes > DEFAULT_WINDOW) {
      this.queue(windowUpdate(0, this.windowBytes - DEFAULT_WINDOW));
    }
  }

  /** Queues a header block for stream `id`, in CONTINUATION frames when it is large. */
  protected queueHeaders(id: number, block: Buffer, endStream: boolean): void {
    const end = endStream ? FLAG_END_STREAM : 0;
    if (block.length <= this.peerMaxFrame) {
      this.queue(frame(FRAME_HEADERS, end | FLAG_END_HEADERS, id, block));
      return;
    }
    let at = this.peerMaxFrame;
    this.queue(frame(FRAME_HEADERS, end, id, block.subarray(0, at)));
    while (at < block.length) {
      const next = Math.min(block.length, at + this.peerMaxFrame);
      const flags = next === block.length ? FLAG_END_HEADERS : 0;
      this.queue(frame(FRAME_CONTINUATION, flags, id, block.subarray(at, next)));
      at = next;
    }
  }

  /** Sends what the stream has pending, as far as the windows allow, then its end if asked. */
  protected drain(id: number, stream: S): void {
    while (stream.pending.length > 0) {
      const chunk = stream.pending[0] as Buffer;
      const size = Math.min(chunk.length, this.peerMaxFrame, this.sendWindow, stream.sendWindow);
      if (size <= 0 && chunk.length > 0) return; // waits for WINDOW_UPDATE
      if (size === chunk.length) stream.pending.shift();
      else stream.pending[0] = chunk.subarray(size);
      this.sendWindow -= size;
      stream.sendWindow -= size;
      const last = stream.pending.length === 0 && stream.endWith === true;
      this.queue(frame(FRAME_DATA, last ? FLAG_END_STREAM : 0, id, chunk.subarray(0, size)));
      if (last) {
        this.endLocal(id, stream);
        return;
      }
    }
    if (stream.endWith === true) {
      this.queue(frame(FRAME_DATA, FLAG_END_STREAM, id, EMPTY));
      this.endLocal(id, stream);
    } else if (stream.endWith !== undefined) {
      this.queueHeaders(id, stream.endWith, true);
      this.endLocal(id, stream);
    }
  }

  private endLocal(id: number, stream: S): void {
    stream.endWith = undefined;
    stream.ended = true;
    this.onLocalEnd(id, stream);
  }

  /** Resets stream `id` with `code` (it must have been forgotten by the caller or be kept). */
  protected queueReset(id: number, code: number): void {
    const payload = Buffer.alloc(4);
    payload.writeUInt32BE(code, 0);
    this.queue(frame(FRAME_RST_STREAM, 0, id, payload));
  }

  protected queue(buf: Buffer): void {
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

  protected flush(): void {
    const s = this.socket;
    if (s === undefined || this.outbox.length === 0) return;
    const data = this.outbox.length === 1 ? (this.outbox[0] as Buffer) : Buffer.concat(this.outbox);
    const written = s.write(data);
    this.outbox = written < data.length ? [data.subarray(Math.max(0, written))] : [];
  }

  /** Bytes from the socket. */
  receive(chunk: Buffer): void {
    let buf = this.received === undefined ? chunk : Buffer.concat([this.received, chunk]);
    this.received = undefined;
    try {
      if (this.prefaceLeft > 0) {
        buf = this.checkPreface(buf);
        if (this.prefaceLeft > 0) return;
      }
      while (buf.length >= 9) {
        const length = buf.readUIntBE(0, 3);
        if (length > MAX_FRAME) {
          throw new Error(`the ${this.peerName} sent a frame of ${length} bytes`);
        }
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
      this.lose(`HTTP/2 ${what} error from the ${this.peerName}: ${(err as Error).message}`);
      return;
    }
    if (buf.length > 0) this.received = Buffer.from(buf);
  }

  /** "server" or "client", for messages. */
  protected abstract readonly peerName: string;

  private checkPreface(buf: Buffer): Buffer {
    const at = PREFACE.length - this.prefaceLeft;
    const n = Math.min(this.prefaceLeft, buf.length);
    if (!buf.subarray(0, n).equals(PREFACE.subarray(at, at + n))) {
      throw new Error("the connection does not start with the HTTP/2 preface");
    }
    this.prefaceLeft -= n;
    return buf.subarray(n);
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
      case FRAME_CONTINUATION:
        this.onContinuation(flags, id, payload);
        return;
      case FRAME_RST_STREAM: {
        const stream = this.streams.get(id);
        if (stream === undefined) return;
        this.streams.delete(id);
        this.onStreamReset(id, stream, payload.length >= 4 ? payload.readUInt32BE(0) : 0);
        return;
      }
      case FRAME_SETTINGS:
        if (!(flags & FLAG_ACK)) this.onSettings(payload);
        return;
      case FRAME_PING:
        if (!(flags & FLAG_ACK)) this.queue(frame(FRAME_PING, FLAG_ACK, 0, Buffer.from(payload)));
        return;
      case FRAME_GOAWAY:
        this.onGoaway(payload.readUInt32BE(0) & MAX_STREAM_ID);
        return;
      case FRAME_WINDOW_UPDATE:
        this.onWindowUpdate(id, payload);
        return;
      case FRAME_PUSH_PROMISE:
        throw new Error(`the ${this.peerName} pushed a stream though push is off`);
      default:
        return; // PRIORITY and unknown types
    }
  }

  private onData(flags: number, id: number, payload: Buffer): void {
    // Flow control counts the whole frame, padding included.
    this.unacked += payload.length;
    if (this.unacked >= this.windowBytes / 2) {
      this.queue(windowUpdate(0, this.unacked));
      this.unacked = 0;
    }
    const stream = this.streams.get(id);
    if (stream === undefined) return;
    const data = flags & FLAG_PADDED ? unpad(payload) : payload;
    const end = (flags & FLAG_END_STREAM) !== 0;
    stream.unacked += payload.length;
    if (!end && stream.unacked >= this.windowBytes / 2) {
      this.queue(windowUpdate(id, stream.unacked));
      stream.unacked = 0;
    }
    this.onStreamData(id, stream, data, end);
  }

  private onHeaders(flags: number, id: number, payload: Buffer): void {
    let block = flags & FLAG_PADDED ? unpad(payload) : payload;
    if (flags & FLAG_PRIORITY) block = block.subarray(5);
    const endStream = (flags & FLAG_END_STREAM) !== 0;
    if (flags & FLAG_END_HEADERS) this.onHeaderBlock(id, this.decoder.decode(block), endStream);
    else this.partial = { id, fragments: [Buffer.from(block)], endStream };
  }

  private onContinuation(flags: number, id: number, payload: Buffer): void {
    const p = this.partial;
    if (p === undefined || p.id !== id) throw new Error("an unexpected CONTINUATION");
    p.fragments.push(Buffer.from(payload));
    if (flags & FLAG_END_HEADERS) {
      this.partial = undefined;
      this.onHeaderBlock(id, this.decoder.decode(Buffer.concat(p.fragments)), p.endStream);
    }
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
      // SETTINGS_HEADER_TABLE_SIZE limits the peer's decoder table, which we never add to.
    }
    this.queue(frame(FRAME_SETTINGS, FLAG_ACK, 0, EMPTY));
    this.resumeAll();
  }

  private onWindowUpdate(id: number, payload: Buffer): void {
    const increment = payload.readUInt32BE(0) & MAX_STREAM_ID;
    if (id === 0) this.sendWindow += increment;
    else {
      const stream = this.streams.get(id);
      if (stream !== undefined) stream.sendWindow += increment;
    }
    this.resumeAll();
  }

  private resumeAll(): void {
    for (const [id, stream] of this.streams) {
      if (stream.pending.length > 0) this.drain(id, stream);
    }
  }

  /** Closes the connection; every open stream hears `why`. */
  protected lose(why: string): void {
    if (this.closed) return;
    this.closed = true;
    this.closeReason = why;
    this.outbox = [];
    this.socket?.terminate();
    this.socket = undefined;
    const lost = [...this.streams];
    this.streams.clear();
    for (const [id, s] of lost) this.onStreamLost(id, s, why);
  }
}

const EMPTY = Buffer.alloc(0);
