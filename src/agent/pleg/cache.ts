// The pod cache: the newest runtime status of each pod, written by PLEG (and by the sync loop
// right after it changed a pod), read by pod workers. A worker that just acted on a pod waits
// with getNewerThan() for a status read after its action, so it never plans from stale data.
//
// Invariants: an entry is never replaced by one with an older timestamp; `globalTimestamp` (the
// start of the last complete relist) only grows.

import type { PodStatus } from "../kubecontainer/types.ts";

interface CacheEntry {
  /** Undefined when the pod has no containers or sandboxes in the runtime. */
  status: PodStatus | undefined;
  /** The last attempt to read the status failed; `status` is then the last good one, if any. */
  error?: Error;
  /** When the status was read (epoch ms). */
  timestamp: number;
}

export interface PodCache {
  get(uid: string): CacheEntry | undefined;
  /** Stores an entry unless the stored one is newer; returns whether it was stored. */
  set(uid: string, status: PodStatus | undefined, timestamp: number, error?: Error): boolean;
  delete(uid: string): void;
  /** Marks every pod as known to be current as of `timestamp` (end of a relist). */
  updateTime(timestamp: number): void;
  /** Resolves with an entry newer than `minTime` (of the pod, or the cache as a whole once a
   * relist that started after `minTime` completed); rejects with the signal's reason on abort. */
  getNewerThan(uid: string, minTime: number, signal?: AbortSignal): Promise<CacheEntry>;
}

interface Waiter {
  uid: string;
  minTime: number;
  resolve: (entry: CacheEntry) => void;
}

export function createPodCache(): PodCache {
  const entries = new Map<string, CacheEntry>();
  let waiters: Waiter[] = [];
  let globalTimestamp = 0;

  const fresh = (uid: string, minTime: number): CacheEntry | undefined => {
    const entry = entries.get(uid);
    if (entry && entry.timestamp > minTime) return entry;
    if (globalTimestamp > minTime)
      return entry ?? { status: undefined, timestamp: globalTimestamp };
    return undefined;
  };

  const wake = () => {
    waiters = waiters.filter((w) => {
      const entry = fresh(w.uid, w.minTime);
      if (entry) w.resolve(entry);
      return entry === undefined;
    });
  };

  return {
    get: (uid) => entries.get(uid),
    set(uid, status, timestamp, error) {
      const old = entries.get(uid);
      if (old && old.timestamp > timestamp) return false;
      entries.set(uid, { status, timestamp, ...(error ? { error } : {}) });
      wake();
      return true;
    },
    delete(uid) {
      entries.delete(uid);
    },
    updateTime(timestamp) {
      globalTimestamp = Math.max(globalTimestamp, timestamp);
      wake();
    },
    getNewerThan(uid, minTime, signal) {
      return new Promise((resolve, reject) => {
        if (signal?.aborted) return reject(signal.reason);
        const entry = fresh(uid, minTime);
        if (entry) return resolve(entry);
        const waiter: Waiter = {
          uid,
          minTime,
          resolve: (e) => {
            signal?.removeEventListener("abort", onAbort);
            resolve(e);
          },
        };
        const onAbort = () => {
          waiters = waiters.filter((w) => w !== waiter);
          reject(signal?.reason);
        };
        waiters.push(waiter);
        signal?.addEventListener("abort", onAbort, { once: true });
      });
    },
  };
}
