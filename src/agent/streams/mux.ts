// The stream-multiplexing part of the agent's hub session (docs/protocol.md, "Streams"): opens a
// stream's work when the hub asks (within the device's cap), passes the hub's data to it as the
// credit it gave allows, and sends the work's output in data frames within the hub's credit,
// taking the streams in turn and only while little is queued in the socket, so that status
// messages never wait behind more than STREAM_LOW_WATER bytes. A bad frame or message ends its stream
// only; the end of the session ends every stream.
import {
  channelsOf,
  decodeFrame,
  decodeHubStreamMessage,
  encodeFrame,
  type HubStreamMessage,
  isStreamType,
  STREAM_DEFAULTS,
  STREAM_LOW_WATER,
  type StreamError,
  type StreamOpen,
  type Welcome,
} from "../../protocol/index.ts";
import {
  type OpenStream,
  StreamFailure,
  type StreamOutput,
  type StreamWork,
} from "../../streams/types.ts";
import type { Logger } from "../../util/log.ts";

export { type OpenStream, StreamFailure, type StreamOutput, type StreamWork };

/** How often blocked output looks at the socket again (Bun's client has no drain event). */
const RETRY_MS = 2;

interface Pending {
  channel: number;
  data: Uint8Array;
  offset: number;
  done: () => void;
}

interface AgentStream {
  id: number;
  req: StreamOpen;
  /** Bytes the hub lets us send. */
  credit: number;
  /** Bytes the hub may still send us. */
  inWindow: number;
  /** Input passed on, not yet given back as credit. */
  consumed: number;
  queue: Pending[];
  work?: StreamWork;
  ending?: { exitCode?: number; error?: StreamError };
  abort: AbortController;
}

/** What a hub session offers the streams part and what it asks of it (the session hands it
 * the frames of the types it owns, and tells it when it is welcomed and when it ends). */
export interface SessionExtension {
  /** Message types it handles. */
  owns(type: string): boolean;
  text(value: Record<string, unknown>): void;
  binary(data: Uint8Array): void;
  /** The session was welcomed (with the hub's stream settings, if any). */
  welcomed(w: Welcome): void;
  /** The session ended: end everything that belonged to it. */
  ended(): void;
}

/** The connection as the mux uses it. */
export interface MuxConnection {
  send(data: string | Uint8Array): boolean;
  buffered(): number;
  setTimer(ms: number, fn: () => void): () => void;
}

export interface MuxDeps {
  conn: MuxConnection;
  log: Logger;
  open: OpenStream;
  /** The device's own cap (hub.maxStreams). */
  maxStreams: number;
}

export class StreamMux implements SessionExtension {
  private readonly streams = new Map<number, AgentStream>();
  private windowBytes: number = STREAM_DEFAULTS.windowBytes;
  private maxFrame: number = STREAM_DEFAULTS.maxFrameBytes;
  private maxStreams: number;
  private order: number[] = [];
  private retry: (() => void) | undefined;

  constructor(private readonly deps: MuxDeps) {
    this.maxStreams = deps.maxStreams;
  }

  owns(type: string): boolean {
    return isStreamType(type);
  }

  welcomed(w: Welcome): void {
    if (w.streams === undefined) return;
    this.windowBytes = w.streams.windowBytes;
    this.maxFrame = w.streams.maxFrameBytes;
    this.maxStreams = Math.min(this.deps.maxStreams, w.streams.maxStreams);
  }

  /** How many streams are open. */
  count(): number {
    return this.streams.size;
  }

  ended(): void {
    for (const s of this.streams.values()) s.abort.abort(new Error("the hub connection closed"));
    this.streams.clear();
    this.retry?.();
  }

  text(value: Record<string, unknown>): void {
    const d = decodeHubStreamMessage(value);
    if (!d.ok) {
      this.deps.log.warn("refused a stream message from the hub", { reason: d.reason });
      if (d.id !== undefined) this.fail(d.id, d.reason);
      return;
    }
    this.handle(d.message);
  }

  private handle(m: HubStreamMessage): void {
    if (m.type === "stream.open") {
      void this.open(m);
      return;
    }
    const s = this.streams.get(m.id);
    if (s === undefined) return;
    if (m.type === "stream.window") {
      s.credit += m.bytes;
      this.flush();
    } else if (m.type === "stream.resize") s.work?.resize?.(m.width, m.height);
    else if (m.type === "stream.eof") s.work?.eof?.();
    else if (m.type === "stream.close") this.drop(s, "the client left");
  }

  private async open(req: StreamOpen): Promise<void> {
    if (this.streams.has(req.id)) {
      this.fail(req.id, `stream ${req.id} is already open`);
      return;
    }
    if (this.streams.size >= this.maxStreams) {
      this.close(req.id, {
        error: {
          code: 429,
          reason: "TooManyRequests",
          message: `the device runs ${this.streams.size} streams already (its limit is ${this.maxStreams})`,
        },
      });
      return;
    }
    const s: AgentStream = {
      id: req.id,
      req,
      credit: req.window,
      inWindow: this.windowBytes,
      consumed: 0,
      queue: [],
      abort: new AbortController(),
    };
    this.streams.set(req.id, s);
    this.order.push(req.id);
    try {
      const work = await this.deps.open(req, this.output(s), s.abort.signal);
      if (s.abort.signal.aborted) return;
      s.work = work;
      this.deps.conn.send(
        JSON.stringify({ type: "stream.ready", id: s.id, window: this.windowBytes }),
      );
      this.flush();
    } catch (err) {
      if (s.abort.signal.aborted) return;
      this.streams.delete(s.id);
      s.abort.abort(err);
      const error =
        err instanceof StreamFailure
          ? err.toError()
          : { code: 500, reason: "InternalError", message: (err as Error).message };
      this.close(s.id, { error });
    }
  }

  private output(s: AgentStream): StreamOutput {
    return {
      write: (channel, data) =>
        new Promise<void>((done) => {
          if (s.abort.signal.aborted || s.ending !== undefined || data.length === 0) return done();
          s.queue.push({ channel, data, offset: 0, done });
          this.flush();
        }),
      end: (result) => {
        if (s.abort.signal.aborted || s.ending !== undefined) return;
        s.ending = result;
        this.flush();
      },
    };
  }

  binary(data: Uint8Array): void {
    const f = decodeFrame(data, this.maxFrame);
    if (!f.ok) {
      if (f.id !== undefined && this.streams.has(f.id)) this.fail(f.id, f.reason);
      else this.deps.log.warn("dropped a bad data frame from the hub", { reason: f.reason });
      return;
    }
    const s = this.streams.get(f.id);
    if (s === undefined || s.work === undefined) return;
    if (!channelsOf(s.req.kind).fromHub.includes(f.channel)) {
      this.fail(s.id, `channel ${f.channel} carries nothing to a ${s.req.kind} stream`);
      return;
    }
    if (f.payload.length > s.inWindow) {
      this.fail(s.id, `the hub sent ${f.payload.length} bytes with ${s.inWindow} of credit left`);
      return;
    }
    s.inWindow -= f.payload.length;
    const passed = () => this.giveBack(s, f.payload.length);
    try {
      const r = s.work.input?.(f.channel, f.payload);
      if (r instanceof Promise) r.then(passed, (err) => this.fail(s.id, (err as Error).message));
      else passed();
    } catch (err) {
      this.fail(s.id, (err as Error).message);
    }
  }

  /** Gives the hub credit back for input passed on, in batches of a quarter window. */
  private giveBack(s: AgentStream, bytes: number): void {
    if (!this.streams.has(s.id)) return;
    s.consumed += bytes;
    if (s.consumed < this.windowBytes / 4 && s.inWindow > 0) return;
    s.inWindow += s.consumed;
    this.deps.conn.send(JSON.stringify({ type: "stream.window", id: s.id, bytes: s.consumed }));
    s.consumed = 0;
  }

  /** Sends queued output, streams in turn, within credit and the socket's low water. */
  private flush(): void {
    let progressed = true;
    while (progressed) {
      progressed = false;
      for (const id of [...this.order]) {
        const s = this.streams.get(id);
        if (s === undefined) {
          this.order = this.order.filter((x) => x !== id);
          continue;
        }
        if (this.deps.conn.buffered() >= STREAM_LOW_WATER) {
          this.later();
          return;
        }
        const p = s.work === undefined ? undefined : s.queue[0];
        if (p !== undefined && s.credit > 0) {
          const n = Math.min(this.maxFrame, s.credit, p.data.length - p.offset);
          this.deps.conn.send(
            encodeFrame(s.id, p.channel, p.data.subarray(p.offset, p.offset + n)),
          );
          s.credit -= n;
          p.offset += n;
          if (p.offset >= p.data.length) {
            s.queue.shift();
            p.done();
          }
          progressed = true;
        }
        if (s.work !== undefined && s.queue.length === 0 && s.ending !== undefined)
          this.close(s.id, s.ending);
      }
    }
  }

  private later(): void {
    if (this.retry !== undefined) return;
    this.retry = this.deps.conn.setTimer(RETRY_MS, () => {
      this.retry = undefined;
      this.flush();
    });
  }

  /** Ends stream `id` because of bad input, telling the hub why. */
  private fail(id: number, reason: string): void {
    const s = this.streams.get(id);
    if (s !== undefined) this.drop(s, reason);
    this.deps.log.warn("ended a stream on bad input", { stream: id, reason });
    this.close(id, { error: { code: 400, reason: "BadRequest", message: reason } });
  }

  private drop(s: AgentStream, why: string): void {
    this.streams.delete(s.id);
    s.abort.abort(new Error(why));
    for (const p of s.queue) p.done();
    s.queue = [];
  }

  private close(id: number, result: { exitCode?: number; error?: StreamError }): void {
    const s = this.streams.get(id);
    if (s !== undefined) this.drop(s, "the stream ended");
    this.deps.conn.send(JSON.stringify({ type: "stream.close", id, ...result }));
  }
}
