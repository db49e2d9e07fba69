/**
 * Injected time. Everything in the agent that waits or reads the time takes a Clock, so unit tests
 * drive time with FakeClock.step() instead of waiting.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Resolves after `ms`; rejects with the signal's reason if aborted first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /** Calls `fn` once after `ms`; returns a cancel function. */
  setTimer(ms: number, fn: () => void): () => void;
}

/** What a wait aborted by `signal` rejects with: its reason, else an AbortError. */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("The operation was aborted", "AbortError");
}

/** Waits `ms` on `clock`, or less if `signal` aborts first; never rejects (loops that sleep
 * between iterations check the signal themselves). */
export function sleepQuietly(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return clock.sleep(ms, signal).catch(() => {});
}

/** The longest delay a runtime timer takes (2^31-1 ms, about 24.8 days): a longer one fires at
 * once (Node and Bun warn and use 1 ms), which made a period of 1000h a busy loop. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The runtime's timer functions, injectable for tests of longTimeout. */
export interface TimerFns {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const runtimeTimers: TimerFns = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

/** Calls `fn` once after `ms` (NaN or less than 0: at once), waiting in steps of at most
 * MAX_TIMER_MS; returns a cancel function. */
export function longTimeout(
  ms: number,
  fn: () => void,
  timers: TimerFns = runtimeTimers,
): () => void {
  let left = Number.isNaN(ms) ? 0 : Math.max(0, ms);
  let handle: unknown;
  const arm = () => {
    const step = Math.min(left, MAX_TIMER_MS);
    left -= step;
    handle = timers.set(left > 0 ? arm : fn, step);
  };
  arm();
  return () => timers.clear(handle);
}

export const realClock: Clock = {
  now: () => Date.now(),
  sleep(ms, signal) {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(abortReason(signal));
      const onAbort = () => {
        cancel();
        reject(abortReason(signal as AbortSignal));
      };
      const cancel = longTimeout(ms, () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      });
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  },
  setTimer(ms, fn) {
    return longTimeout(ms, fn);
  },
};

interface PendingTimer {
  id: number;
  at: number;
  fn: () => void;
}

/** A clock that moves only when step() or set() is called; timers fire in due order. */
export class FakeClock implements Clock {
  private current: number;
  private timers: PendingTimer[] = [];
  private nextId = 1;

  constructor(start = Date.UTC(2026, 0, 1)) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  setTimer(ms: number, fn: () => void): () => void {
    const id = this.nextId++;
    this.timers.push({ id, at: this.current + Math.max(0, ms), fn });
    return () => {
      this.timers = this.timers.filter((t) => t.id !== id);
    };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(abortReason(signal));
      const cancel = this.setTimer(ms, () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      });
      const onAbort = () => {
        cancel();
        reject(abortReason(signal as AbortSignal));
      };
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** Timers still waiting. */
  get pending(): number {
    return this.timers.length;
  }

  /** Moves time forward by `ms`, firing every timer that falls due, in order. */
  step(ms: number): void {
    this.set(this.current + ms);
  }

  /** Moves time to `at` (never backwards), firing due timers in order. */
  set(at: number): void {
    for (;;) {
      const due = this.timers
        .filter((t) => t.at <= at)
        .sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (due === undefined) break;
      this.timers = this.timers.filter((t) => t.id !== due.id);
      this.current = Math.max(this.current, due.at);
      due.fn();
    }
    this.current = Math.max(this.current, at);
  }
}
