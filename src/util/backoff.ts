/**
 * Per-key exponential backoff as the kubelet uses it for crash loops and image pulls: the first
 * failure waits `initialMs`, each further failure doubles the wait up to `maxMs`, and a key that
 * has not failed for `resetAfterMs` starts again from `initialMs`. Time is passed in (`now`).
 */
export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  /** Forget a key whose last failure is older than this (kubelet: 2 × maxMs). */
  resetAfterMs?: number;
}

interface Entry {
  delayMs: number;
  lastFailure: number;
}

export class Backoff {
  private entries = new Map<string, Entry>();

  constructor(private readonly opts: BackoffOptions) {}

  /** Records a failure of `key` at `now` and returns the delay that now applies. */
  next(key: string, now: number): number {
    const entry = this.live(key, now);
    const delayMs =
      entry === undefined ? this.opts.initialMs : Math.min(entry.delayMs * 2, this.opts.maxMs);
    this.entries.set(key, { delayMs, lastFailure: now });
    return delayMs;
  }

  /** The delay of `key` (0 when none applies). */
  get(key: string, now: number): number {
    return this.live(key, now)?.delayMs ?? 0;
  }

  /** Whether `key` is still waiting out its delay at `now`. */
  isInBackoff(key: string, now: number): boolean {
    const entry = this.live(key, now);
    return entry !== undefined && now < entry.lastFailure + entry.delayMs;
  }

  /** Milliseconds left until `key` may be tried again (0 when it may be tried now). */
  remaining(key: string, now: number): number {
    const entry = this.live(key, now);
    return entry === undefined ? 0 : Math.max(0, entry.lastFailure + entry.delayMs - now);
  }

  reset(key: string): void {
    this.entries.delete(key);
  }

  /** Drops entries whose last failure is older than the reset window. */
  gc(now: number): void {
    for (const key of this.entries.keys()) this.live(key, now);
  }

  private live(key: string, now: number): Entry | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    const resetAfter = this.opts.resetAfterMs ?? this.opts.maxMs * 2;
    if (now - entry.lastFailure > resetAfter) {
      this.entries.delete(key);
      return undefined;
    }
    return entry;
  }
}

/**
 * Reconnect delay with exponential backoff and full jitter: uniformly random in
 * [0, min(maxMs, baseMs × 2^attempt)). `random` is injected for tests.
 */
export function fullJitter(
  attempt: number,
  baseMs: number,
  maxMs: number,
  random: () => number = Math.random,
): number {
  const cap = Math.min(maxMs, baseMs * 2 ** Math.min(attempt, 30));
  return Math.floor(random() * cap);
}
