// The server side of one HTTP/2 connection (RFC 9113) without TLS, for the gRPC server
// (grpc-server.ts): streams the client opens, each answered with headers, data and trailers.
// The frame layer is shared with the client (h2-session.ts).
//
// Invariants:
// - Each stream the client opens is handed to `onStream` once; it then hears its request data,
//   its end, and at most one of reset or loss; nothing after the server's side ended and the
//   client's too.
// - A stream is forgotten once both sides ended, or the server's side ended first (the client is
//   then reset with NO_ERROR), or it was reset, or the connection is lost.
// - At most `maxConcurrentStreams` streams are open (announced in our SETTINGS); a stream past
//   it is refused (RST_STREAM REFUSED_STREAM) without reaching `onStream`.
// - A client that resets streams it opened faster than they finish (the "rapid reset" attack)
//   is sent GOAWAY ENHANCE_YOUR_CALM once it has more than RESET_BUDGET such resets to spare.

import type { Socket } from "bun";
import { newSendState, type SendState } from "./h2-flow.ts";
import {
  FRAME_GOAWAY,
  frame,
  H2_CANCEL,
  H2_ENHANCE_YOUR_CALM,
  H2_NO_ERROR,
  H2_PROTOCOL_ERROR,
  H2_REFUSED_STREAM,
  H2Error,
  PREFACE,
  SETTINGS_MAX_CONCURRENT_STREAMS,
} from "./h2-frame.ts";
import { type H2Limits, H2Session } from "./h2-session.ts";
import { encodeHeaders } from "./hpack.ts";

/** One stream as its handler sees it: the request, and how to answer. */
export interface H2ServerStream {
  readonly id: number;
  /** The request's header fields, in order. */
  readonly headers: readonly [string, string][];
  /** Set by the handler: request data, the client's end, and a stream gone without an answer
   * (reset by the client, or the connection lost). */
  onData?: (chunk: Buffer) => void;
  onEnd?: () => void;
  onGone?: (why: string) => void;
  /** Sends the response headers (once); `end`: no data or trailers follow. */
  respond(fields: readonly (readonly [string, string])[], end?: boolean): void;
  /** Sends data, as flow control allows. */
  write(data: Buffer): void;
  /** Ends the server's side: the trailers after the data sent. */
  end(trailers: readonly (readonly [string, string])[]): void;
  /** Resets the stream (RST_STREAM `code`, default CANCEL). */
  reset(code?: number): void;
}

interface Stream extends SendState {
  handle: H2ServerStream;
  /** The client ended its side. */
  remoteEnded: boolean;
}

/** Streams the client may reset before they end, beyond those that ended normally. */
export const RESET_BUDGET = 200;

export interface H2ServerConnectionOptions extends H2Limits {
  /** Streams the client may have open at once. */
  maxConcurrentStreams: number;
  /** A new stream: its handler sets the handle's callbacks at once. */
  onStream(stream: H2ServerStream): void;
}

export class H2ServerConnection extends H2Session<Stream> {
  protected readonly peerName = "client";
  /** The highest stream ID the client opened. */
  private lastId = 0;
  /** GOAWAY sent: new streams are refused, and the connection closes after the last one. */
  private draining = false;
  /** Streams the client reset before they ended, less those that ended normally (never < 0). */
  private resets = 0;

  constructor(
    socket: Socket<unknown>,
    private readonly opts: H2ServerConnectionOptions,
  ) {
    super(opts);
    this.socket = socket;
    this.prefaceLeft = PREFACE.length;
    this.sendSettings([[SETTINGS_MAX_CONCURRENT_STREAMS, opts.maxConcurrentStreams]]);
  }

  /** The socket is writable again. */
  drained(): void {
    this.flush();
  }

  /** The socket closed. */
  closedBySocket(why: string): void {
    this.lose(why);
  }

  /** Says GOAWAY (no new streams) and closes once the open ones ended; `force`: at once. */
  shutdown(force: boolean): void {
    if (this.closed) return;
    const payload = Buffer.alloc(8);
    payload.writeUInt32BE(this.lastId, 0);
    this.queue(frame(FRAME_GOAWAY, 0, 0, payload));
    this.closeReason = "the server is shutting down";
    if (force || this.streams.size === 0) {
      this.flush();
      this.lose(this.closeReason);
    } else this.draining = true;
  }

  protected onHeaderBlock(id: number, fields: [string, string][], end: boolean): void {
    const known = this.streams.get(id);
    if (known !== undefined) {
      // trailers from the client: they end its side
      if (end) this.remoteEnd(id, known);
      return;
    }
    if (id <= this.lastId) return; // a stream already gone
    this.lastId = id;
    if (this.draining || this.streams.size >= this.opts.maxConcurrentStreams) {
      this.queueReset(id, H2_REFUSED_STREAM);
      return;
    }
    const stream = {
      ...newSendState(this.peer.initialWindow, this.limits.windowBytes),
      remoteEnded: false,
    } as Stream;
    stream.handle = this.handleFor(id, stream, fields);
    this.streams.set(id, stream);
    this.opts.onStream(stream.handle);
    if (end) this.remoteEnd(id, stream);
  }

  protected isIdle(id: number): boolean {
    if (id % 2 === 0) throw new H2Error(H2_PROTOCOL_ERROR, `the client used even stream ${id}`);
    return id > this.lastId;
  }

  protected override opensStreams(): boolean {
    return true;
  }

  protected override lastPeerStream(): number {
    return this.lastId;
  }

  protected onStreamData(id: number, stream: Stream, data: Buffer, end: boolean): void {
    if (data.length > 0) stream.handle.onData?.(data);
    if (end) this.remoteEnd(id, stream);
  }

  protected onStreamReset(_id: number, stream: Stream, code: number): void {
    stream.handle.onGone?.(`the client reset the stream (HTTP/2 code ${code})`);
    if (++this.resets > RESET_BUDGET) {
      throw new H2Error(H2_ENHANCE_YOUR_CALM, `the client reset more than ${RESET_BUDGET} streams`);
    }
    this.maybeClose();
  }

  protected onStreamLost(_id: number, stream: Stream, why: string): void {
    stream.handle.onGone?.(why);
  }

  protected onGoaway(): void {
    // The client will open no more streams; those open finish as they are.
  }

  protected override onLocalEnd(id: number, stream: Stream): void {
    // An answer complete before the client's end: the client is told to stop sending (RST_STREAM
    // NO_ERROR, RFC 9113 8.1) and the stream is forgotten, so that what it sends is not read.
    if (!stream.remoteEnded) this.queueReset(id, H2_NO_ERROR);
    this.forget(id);
  }

  private remoteEnd(id: number, stream: Stream): void {
    if (stream.remoteEnded) return;
    stream.remoteEnded = true;
    stream.handle.onEnd?.();
    if (stream.ended) this.forget(id);
  }

  private forget(id: number): void {
    this.streams.delete(id);
    if (this.resets > 0) this.resets--;
    this.maybeClose();
  }

  private maybeClose(): void {
    if (this.draining && this.streams.size === 0) {
      this.flush();
      this.lose(this.closeReason);
    }
  }

  private handleFor(id: number, stream: Stream, headers: [string, string][]): H2ServerStream {
    let responded = false;
    const live = () => this.streams.get(id) === stream && !stream.ended;
    return {
      id,
      headers,
      respond: (fields, end = false) => {
        if (responded || !live()) return;
        responded = true;
        this.queueHeaders(id, encodeHeaders(fields), end);
        if (end) {
          stream.ended = true;
          this.onLocalEnd(id, stream);
        }
      },
      write: (data) => {
        if (!live() || stream.endWith !== undefined) return;
        stream.pending.push(data);
        this.drain(id, stream);
      },
      end: (trailers) => {
        if (!live() || stream.endWith !== undefined) return;
        stream.endWith = encodeHeaders(trailers);
        this.drain(id, stream);
      },
      reset: (code = H2_CANCEL) => {
        if (this.streams.get(id) !== stream) return;
        this.streams.delete(id);
        this.queueReset(id, code);
        this.maybeClose();
      },
    };
  }
}
