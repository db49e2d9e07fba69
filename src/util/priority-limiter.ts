// At most `limit` tasks at once. When a slot frees, the waiting task with the lowest key goes
// next (then the earliest to ask), so that work already under way is finished before new work
// is begun. A task that runs longer than `releaseAfterMs` gives its slot up while it goes on
// running: a hung task cannot hold back the others for long.

import { abortReason, type Clock } from "./clock.ts";

/** Lower goes first: `at` first, then `name`. */
export interface PriorityKey {
  at: number;
  name: string;
}

interface Waiter {
  key: PriorityKey;
  seq: number;
  grant: () => void;
}

function before(a: Waiter, b: Waiter): boolean {
  if (a.key.at !== b.key.at) return a.key.at < b.key.at;
  if (a.key.name !== b.key.name) return a.key.name < b.key.name;
  return a.seq < b.seq;
}

export class PriorityLimiter {
  private holders = 0;
  private readonly waiters: Waiter[] = [];
  private seq = 0;

  /** `limit` 0: no limit, every task runs at once. */
  constructor(
    private readonly limit: number,
    private readonly clock: Clock,
    private readonly releaseAfterMs: number,
  ) {}

  /** Tasks holding a slot. */
  get running(): number {
    return this.holders;
  }

  /** Tasks waiting for one. */
  get waiting(): number {
    return this.waiters.length;
  }

  /** Runs `fn` once a slot is free. If `signal` aborts while it waits, rejects with the
   * signal's reason and `fn` never runs. */
  async run<T>(key: PriorityKey, fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (this.limit <= 0) return fn();
    await this.acquire(key, signal);
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      this.release();
    };
    const cancel = this.clock.setTimer(this.releaseAfterMs, release);
    try {
      return await fn();
    } finally {
      cancel();
      release();
    }
  }

  private acquire(key: PriorityKey, signal: AbortSignal | undefined): Promise<void> {
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    if (this.holders < this.limit) {
      this.holders++;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(abortReason(signal as AbortSignal));
      };
      const waiter: Waiter = {
        key,
        seq: this.seq++,
        grant: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      let i = this.waiters.length;
      while (i > 0 && before(waiter, this.waiters[i - 1] as Waiter)) i--;
      this.waiters.splice(i, 0, waiter);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** Hands the slot to the first waiter, or frees it. */
  private release(): void {
    const next = this.waiters.shift();
    if (next) next.grant();
    else this.holders--;
  }
}
