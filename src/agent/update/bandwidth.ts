// A token bucket over bytes: the cap on an update's download rate (`updateBandwidthLimit`). A
// chunk larger than the bucket is let through at once and paid for afterwards (the bucket goes
// into debt and the next take waits it out), so any chunk size works and the average rate over
// a long download is the limit.
import type { Clock } from "../../util/clock.ts";

export class TokenBucket {
  /** Bytes that may pass now without waiting; below zero: the debt still to wait out. */
  private tokens: number;
  /** Monotonic time of the last refill. */
  private at: number;

  /**
   * `rate` in bytes a second (> 0); `burst`, the bucket's size, defaults to an eighth of a
   * second's worth (at least 1 byte): the most that passes at once after an idle spell.
   */
  constructor(
    private readonly rate: number,
    private readonly clock: Clock,
    private readonly burst = Math.max(1, Math.floor(rate / 8)),
  ) {
    if (!(rate > 0))
      throw new Error(`a bandwidth limit must be above 0 bytes a second, not ${rate}`);
    this.tokens = burst;
    this.at = clock.monotonic();
  }

  /** Takes `n` bytes' worth now; returns how many milliseconds to wait before going on. */
  reserve(n: number): number {
    const now = this.clock.monotonic();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) * this.rate) / 1000);
    this.at = now;
    this.tokens -= n;
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens * 1000) / this.rate);
  }

  /** Takes `n` bytes' worth, waiting as long as the limit needs; rejects if `signal` aborts. */
  async take(n: number, signal?: AbortSignal): Promise<void> {
    const wait = this.reserve(n);
    if (wait > 0) await this.clock.sleep(wait, signal);
  }
}
