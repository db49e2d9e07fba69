// The outbox part of a hub session: after welcome it sends every outbox entry after the hub's
// ackedSeq in seq order, within the hub's rate limit (a token bucket at 90% of the hub's rate,
// one message of its burst kept back), waiting while the socket holds more than 1 MiB. The same
// budget pays for heartbeats. A message larger than the hub accepts is skipped and logged.
import type { SequencedMessage, Welcome } from "../../protocol/index.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import type { Connection } from "./connection.ts";
import type { Outbox } from "./outbox.ts";

/** Bytes left queued in the socket before the pump waits for it to drain. */
const MAX_BUFFERED = 1024 * 1024;

export class OutboxPump {
  private welcome: Welcome | undefined;
  private cursor = 0;
  private tokens = 0;
  private refilledAt = 0;
  private pumpTimer: (() => void) | undefined;

  constructor(
    private readonly conn: Connection,
    private readonly outbox: Outbox,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  /** Starts sending after `w` (the hub's ackedSeq and limits). */
  start(w: Welcome): void {
    this.welcome = w;
    this.tokens = Math.max(1, w.rateLimit.burst - 1);
    this.refilledAt = this.clock.monotonic();
    this.cursor = Math.min(w.ackedSeq, this.outbox.lastSeq);
    this.pump();
  }

  /** Takes one message's worth of the rate budget; false when there is none now. */
  take(): boolean {
    this.refill();
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  /** Sends what the outbox holds beyond the cursor, as the budget and the socket allow. */
  pump(): void {
    const w = this.welcome;
    if (this.conn.finished || w === undefined) return;
    this.refill();
    for (;;) {
      const m = this.outbox.nextAfter(this.cursor);
      if (m === undefined) return;
      if (this.conn.buffered() > MAX_BUFFERED) {
        this.schedule(50);
        return;
      }
      if (this.tokens < 1) {
        this.schedule(((1 - this.tokens) * 1000) / (w.rateLimit.messagesPerSecond * 0.9));
        return;
      }
      const text = JSON.stringify(m);
      this.cursor = m.seq;
      if (this.tooLarge(m, text, w.maxMessageBytes)) continue;
      this.tokens -= 1;
      if (!this.conn.send(text)) return;
    }
  }

  private refill(): void {
    const w = this.welcome;
    if (w === undefined) return;
    const { messagesPerSecond, burst } = w.rateLimit;
    const now = this.clock.monotonic();
    this.tokens = Math.min(
      Math.max(1, burst - 1),
      this.tokens + ((now - this.refilledAt) / 1000) * messagesPerSecond * 0.9,
    );
    this.refilledAt = now;
  }

  private schedule(ms: number): void {
    if (this.pumpTimer !== undefined) return;
    this.pumpTimer = this.conn.setTimer(Math.max(1, Math.ceil(ms)), () => {
      this.pumpTimer = undefined;
      this.pump();
    });
  }

  private tooLarge(m: SequencedMessage, text: string, max: number): boolean {
    const size = Buffer.byteLength(text, "utf8");
    if (size <= max) return false;
    this.log.warn("a message is too large for the hub; not sent", {
      type: m.type,
      seq: m.seq,
      bytes: size,
      max,
    });
    return true;
  }
}
