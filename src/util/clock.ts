/**
 * Injected time. Everything in the agent that waits or reads the time takes a Clock, so unit tests
 * drive time with FakeClock.step() instead of waiting.
 *
 * Two readings: now() is the wall clock, for times that are shown or stored (startedAt, events,
 * transition times); it may step forward or back (a board without a real-time clock boots in 1970
 * and NTP steps it by years). monotonic() only moves forward, at the rate of real time, and is
 * what every duration, deadline, age kept in memory and back-off is measured on. Timers and
 * sleeps run on the monotonic clock.
 */
export interface Clock {
  /** Milliseconds since the epoch (wall clock; may step). */
  now(): number;
  /** Milliseconds from an arbitrary origin (fixed for the process), never stepped: for durations.
   * Never compare it with now() or with times from another process. */
  monotonic(): number;
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

/** Resolves once `signal` aborts (at once when it has): what a loop with nothing left to do
 * but stop awaits. */
export function untilAborted(signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    signal.addEventListener("abort", () => resolve(), { once: true });
  });
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

/**
 * The monotonic reading at which something stamped `at` on a wall clock happened (a container's
 * startedAt or finishedAt from the runtime), as well as `clock` can tell now: its wall-clock age,
 * never less than zero (a time in the future, after the wall clock stepped back, is now). Callers
 * translate an event once, when they first see it, and keep the result: later wall steps then
 * do not move it.
 */
export function monotonicOf(clock: Clock, at: number): number {
  return clock.monotonic() - Math.max(0, clock.now() - at);
}

export const realClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
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

/** The monotonic origin of a FakeClock: far from any wall time a test uses, so that a duration
 * that mixes the two readings shows as a wild figure. */
const FAKE_MONOTONIC_START = 1_000_000_000;

/**
 * A clock that moves only when step(), set() or stepWall() is called. Timers are due on the
 * monotonic reading and fire in due order; step() moves both readings, stepWall() only the wall.
 */
export class FakeClock implements Clock {
  /** The wall reading. */
  private current: number;
  /** The monotonic reading. */
  private mono = FAKE_MONOTONIC_START;
  /** Timers, `at` on the monotonic reading. */
  private timers: PendingTimer[] = [];
  private nextId = 1;

  constructor(start = Date.UTC(2026, 0, 1)) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  monotonic(): number {
    return this.mono;
  }

  setTimer(ms: number, fn: () => void): () => void {
    const id = this.nextId++;
    this.timers.push({ id, at: this.mono + Math.max(0, ms), fn });
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

  /** Lets `ms` pass (both readings move), firing every timer that falls due, in order. */
  step(ms: number): void {
    const end = this.mono + Math.max(0, ms);
    for (;;) {
      const due = this.timers
        .filter((t) => t.at <= end)
        .sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (due === undefined) break;
      this.timers = this.timers.filter((t) => t.id !== due.id);
      this.advance(due.at);
      due.fn();
    }
    this.advance(end);
  }

  /** Lets time pass until the wall reading is `at` (never backwards), firing due timers. */
  set(at: number): void {
    this.step(at - this.current);
  }

  /** Steps the wall reading alone by `ms` (negative: back), as NTP or an operator would; the
   * monotonic reading and the timers are untouched. */
  stepWall(ms: number): void {
    this.current += ms;
  }

  private advance(mono: number): void {
    if (mono <= this.mono) return;
    this.current += mono - this.mono;
    this.mono = mono;
  }
}
