// One end of a relayed stream: it publishes on one direction's subject and reads the other's.
//
// Invariants:
// - Messages of a direction carry a sequence from 0; one missing (NATS dropped it) ends the stream
//   with an error, as data lost in the middle cannot be told to the client any other way. A
//   message that does not decode is dropped and counted without taking a number: had it come from
//   the other end, the next one shows the gap, so nothing is lost silently.
// - The writer never has more payload in flight than the reader granted; the reader grants
//   grantBytes at a time as the bytes it received are taken by its consumer, and starts with two
//   grants, so at most 2 × grantBytes wait on the reader's side.
// - Nothing is published before the other end listens: the holder's end holds what it sends until
//   the first message of the requesting end arrives (that end subscribed before sending it).
// - Each end pings after keepaliveMs without sending, and fails after silenceMs without hearing
//   anything. Once closed, an end holds no subscription and no timer, and its waiting writers go on.
import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import type { StreamError } from "../../protocol/index.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import {
  type Control,
  decodeRelayMessage,
  encodeControl,
  encodeData,
  MAX_CHUNK_BYTES,
  type RelayMessage,
  silenceError,
} from "./codec.ts";

export interface RelayCounters {
  /** Messages from the bus that did not decode, came out of order, or were not expected. */
  malformed: number;
  /** Subscriptions of streams (not of serve()) open now. */
  subscriptions: number;
  /** Timers of streams running now. */
  timers: number;
}

export interface LinkTimings {
  grantBytes: number;
  keepaliveMs: number;
  silenceMs: number;
}

export interface LinkOptions extends LinkTimings {
  nc: NatsConnection;
  clock: Clock;
  log: Logger;
  counters: RelayCounters;
  /** The subject this end publishes on, and the one it reads. */
  tx: string;
  rx: string;
  /** Whether the other end is subscribed to tx already. */
  peerListening: boolean;
  /** The other replica, for errors ("holding node x", "that asked for stream y"). */
  who: string;
}

/** What the end does with what it receives. */
export interface LinkHandlers {
  /** A data payload, in order; resolves when the consumer took it (credit then goes back). */
  data(channel: number, payload: Uint8Array): Promise<void> | void;
  /** resize, eof or end from the other side (the end has closed itself before an end arrives). */
  control(c: Exclude<Control, { t: "credit" | "ping" }>): void;
  /** The stream broke (silence, a lost message, a protocol violation); the end is closed. */
  failed(error: StreamError): void;
}

export class Link {
  private txSeq = 0;
  private rxSeq = 0;
  /** Payload bytes this end may still send. */
  private credit = 0;
  /** Payload bytes the other end may still send us. */
  private window = 0;
  /** Taken by our consumer since the last grant. */
  private consumed = 0;
  private waiters: (() => void)[] = [];
  /** Data, eof and end, in the order they were asked for. */
  private chain: Promise<void> = Promise.resolve();
  private held: Uint8Array[] = [];
  /** Ended before the other end listened: closes once what is held is sent. */
  private ending = false;
  private handlers: LinkHandlers | undefined;
  private closed = false;
  private lastHeard: number;
  private lastSent: number;
  private readonly sub: Subscription;
  private cancelTimer: (() => void) | undefined;

  constructor(private readonly o: LinkOptions) {
    this.lastHeard = this.lastSent = o.clock.monotonic();
    this.sub = o.nc.subscribe(o.rx, {
      callback: (err, msg) => (err === null ? this.receive(msg.data) : this.broke(err)),
    });
    o.counters.subscriptions++;
    this.arm();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Starts handing what arrives to `h`; before this, data is unexpected. */
  attach(h: LinkHandlers): void {
    this.handlers = h;
  }

  /** Credit the other end gave at the start (the holder's, in its answer). */
  addCredit(bytes: number): void {
    this.credit += bytes;
    this.wake();
  }

  /** Grants the other end its first credit (two grants), in a message. */
  start(): void {
    this.grant(this.o.grantBytes);
    this.grant(this.o.grantBytes);
  }

  /** The first credit of the other end, given another way (the holder's answer): what start()
   * grants. */
  startWindow(): number {
    this.window += 2 * this.o.grantBytes;
    return this.window;
  }

  /** Sends `data` on `channel` in chunks, each within credit; resolves once all are published
   * (at once, dropped, when the end is closed). */
  send(channel: number, data: Uint8Array): Promise<void> {
    return this.inOrder(async () => {
      for (let at = 0; at < data.length && !this.closed; ) {
        if (this.credit === 0) {
          await new Promise<void>((go) => this.waiters.push(go));
          continue;
        }
        const take = Math.min(MAX_CHUNK_BYTES, this.credit, data.length - at);
        this.credit -= take;
        this.publish(encodeData(this.txSeq++, channel, data.subarray(at, at + take)));
        at += take;
      }
    });
  }

  resize(width: number, height: number): void {
    this.control({ t: "resize", width, height });
  }

  /** The input ended (after the data sent before). */
  eof(): Promise<void> {
    return this.inOrder(() => this.control({ t: "eof" }));
  }

  /** Ends the stream after the data sent before, then closes this end. */
  end(result: { exitCode?: number; error?: StreamError }): Promise<void> {
    return this.inOrder(() => {
      this.control({ t: "end", ...result });
      this.closeSent();
    });
  }

  /** Tells the other end at once that the stream ended with `error`, and closes. */
  abort(error?: StreamError): void {
    if (this.closed) return;
    this.control(error === undefined ? { t: "end" } : { t: "end", error });
    this.closeSent();
  }

  /** Closes once the end is sent: now, or when the other end listens (its silence timer
   * still runs). */
  private closeSent(): void {
    if (this.o.peerListening) this.close();
    else this.ending = true;
  }

  /** Drops the subscription and the timer; writers waiting for credit go on (their data is
   * dropped). Idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.o.counters.subscriptions--;
    this.sub.unsubscribe();
    if (this.cancelTimer !== undefined) {
      this.cancelTimer();
      this.cancelTimer = undefined;
      this.o.counters.timers--;
    }
    this.held = [];
    this.wake();
  }

  private inOrder(fn: () => Promise<void> | void): Promise<void> {
    this.chain = this.chain.then(fn, fn);
    return this.chain;
  }

  private wake(): void {
    for (const go of this.waiters.splice(0)) go();
  }

  private grant(bytes: number): void {
    this.window += bytes;
    this.control({ t: "credit", bytes });
  }

  private control(c: Control): void {
    this.publish(encodeControl(this.txSeq++, c));
  }

  private publish(message: Uint8Array): void {
    if (this.closed || this.ending) return;
    if (!this.o.peerListening) {
      this.held.push(message);
      return;
    }
    try {
      this.o.nc.publish(this.o.tx, message);
      this.lastSent = this.o.clock.monotonic();
    } catch (err) {
      this.broke(err as Error);
    }
  }

  /** The periodic check: a ping when we have been quiet, a failure when the other end has. */
  private arm(): void {
    const { keepaliveMs, silenceMs, clock } = this.o;
    const tickMs = Math.max(1, Math.min(keepaliveMs, silenceMs / 4));
    this.o.counters.timers++;
    this.cancelTimer = clock.setTimer(tickMs, () => {
      this.cancelTimer = undefined;
      this.o.counters.timers--;
      if (this.closed) return;
      const now = clock.monotonic();
      if (now - this.lastHeard >= silenceMs) {
        this.fail(silenceError(silenceMs, this.o.who), false);
        return;
      }
      if (now - this.lastSent >= keepaliveMs) this.control({ t: "ping" });
      this.arm();
    });
  }

  /** Our connection failed: nothing more can be sent, not even the end. */
  private broke(err: Error): void {
    const message = `the bus failed: ${err.message}`;
    this.fail({ code: 503, reason: "ServiceUnavailable", message }, false);
  }

  /** Ends the stream on a failure; the other end is told unless it cannot be (silent, or our
   * connection failed). */
  private fail(error: StreamError, tell = true): void {
    if (this.closed) return;
    if (tell) this.abort(error);
    else this.close();
    this.handlers?.failed(error);
  }

  private malformed(reason: string): void {
    this.o.counters.malformed++;
    this.o.log.warn("dropped a relayed stream message", { subject: this.o.rx, reason });
  }

  private receive(raw: Uint8Array): void {
    if (this.closed) return;
    const d = decodeRelayMessage(raw);
    if (!d.ok) this.malformed(d.reason);
    else if (d.value.seq < this.rxSeq)
      this.malformed(`message ${d.value.seq} again (expected ${this.rxSeq})`);
    else if (d.value.seq > this.rxSeq)
      this.fail(lost(`messages ${this.rxSeq} to ${d.value.seq - 1} of the stream were lost`));
    else this.deliver(d.value);
  }

  private deliver(m: RelayMessage): void {
    this.rxSeq++;
    this.lastHeard = this.o.clock.monotonic();
    if (!this.o.peerListening) {
      this.o.peerListening = true;
      const ending = this.ending;
      this.ending = false;
      for (const h of this.held.splice(0)) this.publish(h);
      if (ending) {
        this.close();
        return;
      }
    }
    if (m.type === "data") {
      this.data(m.channel, m.payload);
      return;
    }
    const c = m.control;
    if (c.t === "credit") this.addCredit(c.bytes);
    else if (c.t === "end") {
      this.close();
      this.handlers?.control(c);
    } else if (c.t !== "ping") this.handlers?.control(c);
  }

  private data(channel: number, payload: Uint8Array): void {
    const h = this.handlers;
    if (h === undefined) this.malformed("data before the stream was accepted");
    else if (payload.length > this.window)
      this.fail(lost(`${payload.length} bytes came with ${this.window} of credit left`));
    else {
      this.window -= payload.length;
      // A copy: the payload is a view of the client's read buffer.
      void Promise.resolve(h.data(channel, payload.slice()))
        .catch(() => {})
        .then(() => this.took(payload.length));
    }
  }

  private took(bytes: number): void {
    if (this.closed) return;
    this.consumed += bytes;
    while (this.consumed >= this.o.grantBytes) {
      this.consumed -= this.o.grantBytes;
      this.grant(this.o.grantBytes);
    }
  }
}

const lost = (message: string): StreamError => ({
  code: 502,
  reason: "BadGateway",
  message: `relayed stream broken: ${message}`,
});
