// CrashLoopBackOff, with the semantics of kubelet's flowcontrol.Backoff as SyncPod uses it:
// - A container that exited is in back-off while the time since it finished is below the key's
//   delay. That time is measured on the monotonic clock from the exit's first sight (its
//   wall-clock age then, at least 0), so that a wall step neither frees nor freezes a crash loop.
// - Each restart (next) doubles the delay, from `initialMs` up to `maxMs`, and remembers when.
// - A key whose container finished more than 2 × maxMs after its last restart (it ran for a
//   long time: 10 minutes with the default 5 minute cap) starts again from `initialMs`.
// Keys are per pod and container spec: "<name>_<namespace>_<uid>_<container>_<hash>".

import { type Clock, monotonicOf } from "../../util/clock.ts";

export interface CrashLoopOptions {
  initialMs: number;
  maxMs: number;
}

interface Entry {
  delayMs: number;
  /** When the last restart was allowed (monotonic ms). */
  lastUpdate: number;
}

/** A container exit as first seen: the runtime's finishedAt (wall ms, which names the exit) and
 * the monotonic time it stands for. */
interface Exit {
  finishedAt: number;
  mono: number;
}

export class CrashLoopBackoff {
  private readonly entries = new Map<string, Entry>();
  /** The last exit seen per key. */
  private readonly exits = new Map<string, Exit>();

  constructor(
    private readonly opts: CrashLoopOptions,
    private readonly clock: Clock,
  ) {}

  private expired(entry: Entry, eventMono: number): boolean {
    return eventMono - entry.lastUpdate > 2 * this.opts.maxMs;
  }

  /**
   * The monotonic time of the exit of `key` at wall time `finishedAt`, fixed when first seen: its
   * wall-clock age then, but never before the restart that started this container plus the time
   * it ran (`ranMs`, from the runtime's own startedAt and finishedAt), so that an age made up by a
   * wall step, or by a runtime whose clock is behind the agent's, cannot end a back-off early.
   */
  private exitOf(key: string, finishedAt: number, ranMs: number): number {
    const seen = this.exits.get(key);
    if (seen?.finishedAt === finishedAt) return seen.mono;
    const now = this.clock.monotonic();
    const restarted = this.entries.get(key)?.lastUpdate;
    const earliest = restarted === undefined ? 0 : Math.min(now, restarted + Math.max(0, ranMs));
    const mono = Math.max(monotonicOf(this.clock, finishedAt), earliest);
    this.exits.set(key, { finishedAt, mono });
    return mono;
  }

  /** Whether a container that ran `ranMs` and finished at `finishedAt` (the runtime's wall
   * clock) must still wait now. */
  isInBackOffSince(key: string, finishedAt: number, ranMs = 0): boolean {
    const entry = this.entries.get(key);
    const exit = this.exitOf(key, finishedAt, ranMs);
    if (!entry || this.expired(entry, exit)) return false;
    return this.clock.monotonic() - exit < entry.delayMs;
  }

  /** The current delay of `key` (0 when none). */
  get(key: string): number {
    return this.entries.get(key)?.delayMs ?? 0;
  }

  /** Records a restart now of a container that ran `ranMs` and finished at `finishedAt`. */
  next(key: string, finishedAt: number, ranMs = 0): void {
    const entry = this.entries.get(key);
    const delayMs =
      !entry || this.expired(entry, this.exitOf(key, finishedAt, ranMs))
        ? this.opts.initialMs
        : Math.min(entry.delayMs * 2, this.opts.maxMs);
    this.entries.set(key, { delayMs, lastUpdate: this.clock.monotonic() });
  }

  /** Forgets keys not restarted within 2 × maxMs. */
  gc(): void {
    const now = this.clock.monotonic();
    for (const [key, entry] of this.entries) if (this.expired(entry, now)) this.entries.delete(key);
    for (const key of this.exits.keys()) if (!this.entries.has(key)) this.exits.delete(key);
  }

  get size(): number {
    return this.entries.size;
  }
}
