// A token bucket per connection: `burst` messages at once, refilled at `perSecond`. Time is
// passed in, so tests step it by hand.

export interface RateLimit {
  messagesPerSecond: number;
  burst: number;
}

export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    private readonly limit: RateLimit,
    now: number,
  ) {
    this.tokens = limit.burst;
    this.last = now;
  }

  /** Takes one token at `now`; false when the bucket is empty (the message is over the limit). */
  take(now: number): boolean {
    const elapsed = Math.max(0, now - this.last);
    this.last = now;
    this.tokens = Math.min(
      this.limit.burst,
      this.tokens + (elapsed * this.limit.messagesPerSecond) / 1000,
    );
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}
