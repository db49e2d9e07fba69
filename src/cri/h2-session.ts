// What both ends of an HTTP/2 connection (RFC 9113) do alike, for the client (h2.ts) and the
// server (h2-server.ts): reading frames from the socket, header blocks (HPACK, CONTINUATION),
// SETTINGS, PING, WINDOW_UPDATE, and sending each stream's data within both flow-control windows,
// ending it with END_STREAM or a trailers block. What a stream means is left to the subclass.
//
// The peer is not trusted (a pod answering a gRPC probe is anyone's code), so every frame is
// checked as RFC 9113 says and everything the peer can make us hold is bounded: a header block
// by `maxHeaderListBytes` (its encoded bytes and its decoded fields), a partial frame by the
// frame size we announce, what waits for it to read by `maxQueuedBytes` (and the replies it asks
// for, acknowledgements, by MAX_QUEUED_REPLIES), and the data it sends by our flow-control windows.
// A peer that breaks a rule gets GOAWAY with the error's code and the connection is closed; its
// streams hear why.
//
// Invariants:
// - Every header block is decoded, even of a stream that is gone, so that the HPACK table stays
//   in step with the peer's.
// - A stream's data goes out in order, never past the peer's windows; its end (END_STREAM or
//   trailers) goes out after its last data.
// - Frames written in one turn of the event loop go out in one write.
// - The peer never has more than our window in flight: DATA past it is a FLOW_CONTROL_ERROR.

import type { Socket } from "bun";
import { ReceiveWindow, type SendState } from "./h2-flow.ts";
import {
  DEFAULT_WINDOW,
  FLAG_ACK,
  FLAG_END_STREAM,
  FLAG_PADDED,
  FRAME_CONTINUATION,
  FRAME_DATA,
  FRAME_GOAWAY,
  FRAME_HEADERS,
  FRAME_PING,
  FRAME_RST_STREAM,
  FRAME_SETTINGS,
  FRAME_WINDOW_UPDATE,
  FrameAssembler,
  frame,
  H2_ENHANCE_YOUR_CALM,
  H2_FLOW_CONTROL_ERROR,
  H2_FRAME_SIZE_ERROR,
  H2_NO_ERROR,
  H2_PROTOCOL_ERROR,
  H2Error,
  headerFrames,
  MAX_FRAME,
  MAX_STREAM_ID,
  MAX_WINDOW,
  PREFACE,
  SETTINGS_INITIAL_WINDOW_SIZE,
  SETTINGS_MAX_HEADER_LIST_SIZE,
  settingsFrame,
  unpad,
  windowUpdate,
} from "./h2-frame.ts";
import { checkFrame, connectionError } from "./h2-frame-check.ts";
import { type HeaderBlock, HeaderBlockReader } from "./h2-header-block.ts";
import { FrameOutbox, MAX_QUEUED_REPLIES } from "./h2-outbox.ts";
import { applySettings, type PeerSettings } from "./h2-settings.ts";

/** What one connection takes from its peer. */
export interface H2Limits {
  /** Our receive window for the connection and each stream (bytes). */
  windowBytes: number;
  /** The largest header block we accept, in encoded bytes and in decoded fields (name and value
   * bytes plus 32 each); announced as SETTINGS_MAX_HEADER_LIST_SIZE. */
  maxHeaderListBytes: number;
  /** The most bytes of frames held for a peer that does not read them (default MAX_QUEUED_BYTES). */
  maxQueuedBytes?: number;
}

export abstract class H2Session<S extends SendState> {
  protected socket: Socket<unknown> | undefined;
  protected readonly streams = new Map<number, S>();
  protected closed = false;
  /** Why the connection closed or is closing, for streams opened after. */
  protected closeReason = "";
  /** Bytes of the client's connection preface still to check (a server expects 24). */
  protected prefaceLeft = 0;
  /** The peer's first SETTINGS arrived: its connection preface is complete, and until then the
   * connection is not established. */
  protected settingsReceived = false;
  /** What the peer announced in its SETTINGS. */
  protected readonly peer: PeerSettings = {
    initialWindow: DEFAULT_WINDOW,
    maxFrame: MAX_FRAME,
    maxConcurrentStreams: Number.POSITIVE_INFINITY,
  };
  /** Frames waiting for the socket. */
  private readonly outbox: FrameOutbox;
  private readonly headerBlocks: HeaderBlockReader;
  private readonly received = new FrameAssembler();
  private sendWindow = DEFAULT_WINDOW;
  /** What the peer may send us on the connection. */
  private readonly recv: ReceiveWindow;

  constructor(protected readonly limits: H2Limits) {
    this.recv = new ReceiveWindow(limits.windowBytes, Math.max(limits.windowBytes, DEFAULT_WINDOW));
    this.headerBlocks = new HeaderBlockReader(limits.maxHeaderListBytes);
    this.outbox = new FrameOutbox(() => this.socket, limits.maxQueuedBytes);
  }

  /** A header block arrived on stream `id` (which may be unknown: a new stream, or one gone). */
  protected abstract onHeaderBlock(id: number, fields: [string, string][], end: boolean): void;
  /** Data of a known stream; `end`: the peer ended the stream with it. */
  protected abstract onStreamData(id: number, stream: S, data: Buffer, end: boolean): void;
  /** The peer reset a known stream. */
  protected abstract onStreamReset(id: number, stream: S, code: number): void;
  /** The connection is gone; every stream still open hears `why` (`code`: the HTTP/2 error that
   * closed it, undefined when the socket closed). */
  protected abstract onStreamLost(id: number, stream: S, why: string, code?: number): void;
  /** The peer sent GOAWAY: streams above `lastId` were not processed. */
  protected abstract onGoaway(lastId: number): void;
  /** Whether stream `id` is one the peer may not use yet (RFC 9113 5.1: idle). */
  protected abstract isIdle(id: number): boolean;
  /** The highest stream the peer opened, for our GOAWAY. */
  protected lastPeerStream(): number {
    return 0;
  }
  /** Our side of a stream ended (its END_STREAM was queued). */
  protected onLocalEnd(_id: number, _stream: S): void {}
  /** The peer's SETTINGS changed what we may do (more streams, larger windows). */
  protected onPeerSettings(): void {}

  /** "server" or "client", for messages. */
  protected abstract readonly peerName: string;

  /** Queues our SETTINGS (`extra` besides our initial window and header list size) and the
   * connection window. */
  protected sendSettings(extra: [number, number][]): void {
    const { windowBytes, maxHeaderListBytes } = this.limits;
    this.queue(
      settingsFrame([
        ...extra,
        [SETTINGS_INITIAL_WINDOW_SIZE, windowBytes],
        [SETTINGS_MAX_HEADER_LIST_SIZE, maxHeaderListBytes],
      ]),
    );
    if (windowBytes > DEFAULT_WINDOW) this.queue(windowUpdate(0, windowBytes - DEFAULT_WINDOW));
  }

  /** Queues a header block for stream `id`, in CONTINUATION frames when it is large. */
  protected queueHeaders(id: number, block: Buffer, endStream: boolean): void {
    for (const f of headerFrames(id, block, endStream, this.peer.maxFrame)) this.queue(f);
  }

  /** Sends what the stream has pending, as far as the windows allow, then its end if asked. */
  protected drain(id: number, stream: S): void {
    while (stream.pending.length > 0) {
      const chunk = stream.pending[0] as Buffer;
      const size = Math.min(chunk.length, this.peer.maxFrame, this.sendWindow, stream.sendWindow);
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
    this.queue(frame(FRAME_RST_STREAM, 0, id, payload), true);
  }

  /** Queues a frame; `reply`: one the peer's own frames asked for. A peer that leaves more than
   * the outbox's maxBytes, or more than MAX_QUEUED_REPLIES replies, unread is flooding us, and
   * loses the connection (at once, not by a throw: a reset may be queued outside the frame loop,
   * by a call's deadline). */
  protected queue(buf: Buffer, reply = false): void {
    if (this.closed || (reply ? this.outbox.pushReply(buf) : this.outbox.push(buf))) return;
    const what = this.outbox.full(buf)
      ? `${this.outbox.maxBytes} bytes`
      : `${MAX_QUEUED_REPLIES} replies`;
    const why = `more than ${what} are waiting for the ${this.peerName} to read them`;
    this.fail(new H2Error(H2_ENHANCE_YOUR_CALM, why));
  }

  protected flush(): void {
    this.outbox.flush();
  }

  /** Bytes from the socket; none are read once the connection closed. */
  receive(chunk: Buffer): void {
    const whole = this.closed ? undefined : this.prefaceLeft > 0 ? chunk : this.received.add(chunk);
    if (whole === undefined) return;
    let buf = whole;
    try {
      if (this.prefaceLeft > 0) {
        buf = this.checkPreface(buf);
        if (this.prefaceLeft > 0) return;
      }
      while (buf.length >= 9) {
        const length = buf.readUIntBE(0, 3);
        if (length > MAX_FRAME) {
          throw new H2Error(
            H2_FRAME_SIZE_ERROR,
            `a frame of ${length} bytes (at most ${MAX_FRAME})`,
          );
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
      this.fail(err);
      return;
    }
    if (buf.length > 0) this.received.keep(buf);
  }

  /** Closes the connection for a rule the peer broke, telling it why with GOAWAY. */
  private fail(err: unknown): void {
    const { code, why } = connectionError(err);
    this.goaway(code);
    this.lose(`HTTP/2 ${why} from the ${this.peerName}: ${(err as Error).message ?? err}`, code);
  }

  /** Writes GOAWAY with `code` at once, ahead of anything queued. */
  private goaway(code: number): void {
    const payload = Buffer.alloc(8);
    payload.writeUInt32BE(this.lastPeerStream(), 0);
    payload.writeUInt32BE(code, 4);
    this.outbox.sendAlone(frame(FRAME_GOAWAY, 0, 0, payload));
  }

  private checkPreface(buf: Buffer): Buffer {
    const at = PREFACE.length - this.prefaceLeft;
    const n = Math.min(this.prefaceLeft, buf.length);
    if (!buf.subarray(0, n).equals(PREFACE.subarray(at, at + n))) {
      throw new H2Error(H2_PROTOCOL_ERROR, "the connection does not start with the HTTP/2 preface");
    }
    this.prefaceLeft -= n;
    return buf.subarray(n);
  }

  private onFrame(type: number, flags: number, id: number, payload: Buffer): void {
    if (this.headerBlocks.open && type !== FRAME_CONTINUATION) {
      throw new H2Error(H2_PROTOCOL_ERROR, "a header block was interrupted");
    }
    if (!this.settingsReceived && (type !== FRAME_SETTINGS || flags & FLAG_ACK)) {
      throw new H2Error(H2_PROTOCOL_ERROR, `the ${this.peerName} did not start with SETTINGS`);
    }
    checkFrame(type, flags, id, payload.length, this.peerName);
    switch (type) {
      case FRAME_DATA:
        this.onData(flags, id, payload);
        break;
      case FRAME_HEADERS:
        this.headerBlock(this.headerBlocks.headers(flags, id, payload));
        break;
      case FRAME_CONTINUATION:
        this.headerBlock(this.headerBlocks.continuation(flags, id, payload));
        break;
      case FRAME_RST_STREAM:
        this.onReset(id, payload);
        break;
      case FRAME_SETTINGS:
        this.onSettings(flags, payload);
        break;
      case FRAME_PING:
        this.onPing(flags, payload);
        break;
      case FRAME_GOAWAY:
        this.onGoaway(payload.readUInt32BE(0) & MAX_STREAM_ID);
        break;
      case FRAME_WINDOW_UPDATE:
        this.onWindowUpdate(id, payload);
        break;
      default:
        break; // PRIORITY, and unknown types, are ignored
    }
  }

  private onData(flags: number, id: number, payload: Buffer): void {
    if (this.isIdle(id)) throw new H2Error(H2_PROTOCOL_ERROR, `DATA on stream ${id}, never opened`);
    // Flow control counts the whole frame, padding included.
    const connectionIncrement = this.recv.take(payload.length, "the connection");
    if (connectionIncrement > 0) this.queue(windowUpdate(0, connectionIncrement), true);
    const stream = this.streams.get(id);
    if (stream === undefined) return;
    const end = (flags & FLAG_END_STREAM) !== 0;
    const increment = stream.recv.take(payload.length, `stream ${id}`, !end);
    if (increment > 0) this.queue(windowUpdate(id, increment), true);
    this.onStreamData(id, stream, flags & FLAG_PADDED ? unpad(payload) : payload, end);
  }

  private headerBlock(block: HeaderBlock | undefined): void {
    if (block === undefined) return;
    if (this.isIdle(block.id) && !this.opensStreams()) {
      throw new H2Error(H2_PROTOCOL_ERROR, `HEADERS on stream ${block.id}, never opened`);
    }
    this.onHeaderBlock(block.id, block.fields, block.endStream);
  }

  /** Whether the peer may open streams with HEADERS (a client may; a server may not). */
  protected opensStreams(): boolean {
    return false;
  }

  private onReset(id: number, payload: Buffer): void {
    if (this.isIdle(id)) {
      throw new H2Error(H2_PROTOCOL_ERROR, `RST_STREAM on stream ${id}, never opened`);
    }
    const stream = this.streams.get(id);
    if (stream === undefined) return;
    this.streams.delete(id);
    this.onStreamReset(id, stream, payload.readUInt32BE(0));
  }

  private onSettings(flags: number, payload: Buffer): void {
    if (flags & FLAG_ACK) return;
    const delta = applySettings(this.peer, payload, this.peerName);
    this.settingsReceived = true;
    if (delta !== 0) {
      for (const s of this.streams.values()) {
        s.sendWindow += delta;
        if (s.sendWindow > MAX_WINDOW) {
          throw new H2Error(
            H2_FLOW_CONTROL_ERROR,
            "SETTINGS_INITIAL_WINDOW_SIZE overflows a window",
          );
        }
      }
    }
    this.queue(frame(FRAME_SETTINGS, FLAG_ACK, 0, EMPTY), true);
    this.onPeerSettings();
    this.resumeAll();
  }

  private onPing(flags: number, payload: Buffer): void {
    if (!(flags & FLAG_ACK)) this.queue(frame(FRAME_PING, FLAG_ACK, 0, Buffer.from(payload)), true);
  }

  private onWindowUpdate(id: number, payload: Buffer): void {
    const increment = payload.readUInt32BE(0) & MAX_STREAM_ID;
    if (increment === 0) throw new H2Error(H2_PROTOCOL_ERROR, "a WINDOW_UPDATE of 0");
    if (id === 0) {
      this.sendWindow += increment;
      if (this.sendWindow > MAX_WINDOW) {
        throw new H2Error(H2_FLOW_CONTROL_ERROR, "a WINDOW_UPDATE past 2^31-1 on the connection");
      }
    } else {
      if (this.isIdle(id)) {
        throw new H2Error(H2_PROTOCOL_ERROR, `WINDOW_UPDATE on stream ${id}, never opened`);
      }
      const stream = this.streams.get(id);
      if (stream === undefined) return;
      stream.sendWindow += increment;
      if (stream.sendWindow > MAX_WINDOW) {
        throw new H2Error(H2_FLOW_CONTROL_ERROR, `a WINDOW_UPDATE past 2^31-1 on stream ${id}`);
      }
    }
    this.resumeAll();
  }

  private resumeAll(): void {
    for (const [id, stream] of this.streams) {
      if (stream.pending.length > 0) this.drain(id, stream);
    }
  }

  /** Closes the connection; every open stream hears `why` (and `code`, for an HTTP/2 error). */
  protected lose(why: string, code?: number): void {
    if (this.closed) return;
    this.closed = true;
    this.closeReason = why;
    this.outbox.clear();
    this.headerBlocks.clear();
    this.received.clear();
    this.socket?.terminate();
    this.socket = undefined;
    const lost = [...this.streams];
    this.streams.clear();
    for (const [id, s] of lost)
      this.onStreamLost(id, s, why, code === H2_NO_ERROR ? undefined : code);
  }
}

const EMPTY = Buffer.alloc(0);
