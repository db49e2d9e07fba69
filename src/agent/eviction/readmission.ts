// When an evicted pod may run again. On a fleetlet device every pod is static: its manifest is
// still in the folder after an eviction, and admitting it straight back would push the device
// over again. So an evicted pod stays Failed/Evicted, and is admitted again (a new instance,
// through admission) only once the pressure condition that evicted it has been False for
// `delay`, where delay = transition period × 2^(evictions − 1), at most an hour; a pod evicted
// for its own local storage limit waits `delay` after its eviction. A pod rejected at admission
// because of pressure waits the same way (its rejection does not count as an eviction). The
// count of a pod (by namespace/name) is forgotten an hour after its last eviction.
//
// Pure: every method takes the time; the caller asks due() what to readmit.
import type { PressureCondition } from "../evictionapi/signals.ts";

const MAX_READMISSION_DELAY_MS = 60 * 60_000;
const FORGET_AFTER_MS = 60 * 60_000;

interface Waiting {
  fullName: string;
  /** When the pod was evicted or rejected. */
  at: number;
  /** The conditions that must have been False for the delay; none for a local storage limit. */
  conditions: readonly PressureCondition[];
  delayMs: number;
}

export interface Readmission {
  /** Records that the pod was evicted (counted) or rejected for pressure (not counted). */
  record(
    uid: string,
    fullName: string,
    conditions: readonly PressureCondition[],
    counted: boolean,
    now: number,
  ): void;
  /** UIDs whose wait is over: none of their conditions is True, each has been False for the
   * delay, and the delay has passed since the eviction. `falseSince(c)` is when condition c
   * last became False (undefined while it is True). */
  due(falseSince: (c: PressureCondition) => number | undefined, now: number): string[];
  /** Stops waiting for the pod (readmitted, or its manifest removed). */
  forget(uid: string): void;
  /** The pod's wait, for status messages and tests. */
  waiting(uid: string): { delayMs: number; evictions: number } | undefined;
}

export function createReadmission(opts: { transitionMs: number }): Readmission {
  const waiting = new Map<string, Waiting>();
  /** Evictions per full name, with the time of the last one. */
  const counts = new Map<string, { n: number; last: number }>();

  function delayFor(n: number): number {
    const base = Math.max(opts.transitionMs, 1000);
    return Math.min(base * 2 ** Math.max(0, n - 1), Math.max(MAX_READMISSION_DELAY_MS, base));
  }

  return {
    record(uid, fullName, conditions, counted, now) {
      let count = counts.get(fullName);
      if (count !== undefined && now - count.last > FORGET_AFTER_MS) count = undefined;
      if (counted) count = { n: (count?.n ?? 0) + 1, last: now };
      if (count !== undefined) counts.set(fullName, count);
      else counts.delete(fullName);
      waiting.set(uid, { fullName, at: now, conditions, delayMs: delayFor(count?.n ?? 1) });
    },
    due(falseSince, now) {
      const out: string[] = [];
      for (const [uid, w] of waiting) {
        if (now - w.at < w.delayMs) continue;
        const clear = w.conditions.every((c) => {
          const since = falseSince(c);
          return since !== undefined && now - since >= w.delayMs;
        });
        if (clear) out.push(uid);
      }
      return out;
    },
    forget(uid) {
      waiting.delete(uid);
    },
    waiting(uid) {
      const w = waiting.get(uid);
      if (w === undefined) return undefined;
      return { delayMs: w.delayMs, evictions: counts.get(w.fullName)?.n ?? 0 };
    },
  };
}
