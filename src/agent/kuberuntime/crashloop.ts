// CrashLoopBackOff, with the semantics of kubelet's flowcontrol.Backoff as SyncPod uses it:
// - A container that exited is in back-off while `now - finishedAt` is below the key's delay.
// - Each restart (next) doubles the delay, from `initialMs` up to `maxMs`, and remembers when.
// - A key whose container finished more than 2 × maxMs after its last restart (it ran for a
//   long time: 10 minutes with the default 5 minute cap) starts again from `initialMs`.
// Keys are per pod and container spec: "<name>_<namespace>_<uid>_<container>_<hash>".

export interface CrashLoopOptions {
  initialMs: number;
  maxMs: number;
}

interface Entry {
  delayMs: number;
  /** When the last restart was allowed (ms). */
  lastUpdate: number;
}

export class CrashLoopBackoff {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly opts: CrashLoopOptions) {}

  private expired(entry: Entry, eventTime: number): boolean {
    return eventTime - entry.lastUpdate > 2 * this.opts.maxMs;
  }

  /** Whether a container that finished at `finishedAt` must still wait at `now`. */
  isInBackOffSince(key: string, finishedAt: number, now: number): boolean {
    const entry = this.entries.get(key);
    if (!entry || this.expired(entry, finishedAt)) return false;
    return now - finishedAt < entry.delayMs;
  }

  /** The current delay of `key` (0 when none). */
  get(key: string): number {
    return this.entries.get(key)?.delayMs ?? 0;
  }

  /** Records a restart at `now` of a container that finished at `finishedAt`. */
  next(key: string, finishedAt: number, now: number): void {
    const entry = this.entries.get(key);
    const delayMs =
      !entry || this.expired(entry, finishedAt)
        ? this.opts.initialMs
        : Math.min(entry.delayMs * 2, this.opts.maxMs);
    this.entries.set(key, { delayMs, lastUpdate: now });
  }

  /** Forgets keys not restarted within 2 × maxMs of `now`. */
  gc(now: number): void {
    for (const [key, entry] of this.entries) if (this.expired(entry, now)) this.entries.delete(key);
  }

  get size(): number {
    return this.entries.size;
  }
}
