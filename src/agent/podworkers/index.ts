// Pod workers: one serialized worker per pod UID, moving each pod through
// sync → terminating → terminated, as the kubelet's pod workers do, and remembering which pods
// were terminated by an eviction (the kubelet's evicted state).
//
// Invariants:
// - At most one sync/terminate call runs per UID at a time; updates arriving meanwhile are merged
//   into one pending update (the newest pod wins) and run next (worker.ts).
// - A kill is never lost: once termination is requested, later updates cannot cancel it; only
//   the grace period may shrink. A kill cancels the pod's sync in flight (its signal aborts), so
//   termination need not wait for a slow pull or a queued start.
// - Once a pod is terminated its worker ignores everything until it is dropped: by a sync of known
//   pods once the pod is not desired, or by forgetTerminated() (an evicted pod readmitted). A
//   create for a terminated UID (the same pod desired again) is remembered, and the next sync of
//   known pods drops that worker even though the pod is desired, so that the caller starts it
//   afresh (the kubelet's restartRequested).
// - Static pods: only one UID per full name (namespace/name) may run at once (names.ts).
import type { Pod } from "../../api/types.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { StartedNames } from "./names.ts";
import type { PodSyncFns, PodUpdate, WorkerState } from "./types.ts";
import { fullNameOf, mergeUpdate, newWorker, type Worker } from "./worker.ts";

export type { KillOptions, PodSyncFns, PodUpdate, UpdateType, WorkerState } from "./types.ts";

export interface PodWorkersDeps extends PodSyncFns {
  clock: Clock;
  logger: Logger;
  /** Called after each sync with the delay until the pod should sync again (error → backoff). */
  requeue(uid: string, delayMs: number): void;
  resyncIntervalMs: number;
  /** Delay before retrying a sync that threw or that reported a back-off. */
  errorBackoffMs: number;
}

export interface PodWorkers {
  /** Queues an update for the pod's worker; starts the worker if idle. */
  updatePod(update: PodUpdate): void;
  /** The worker's state, or undefined if the UID is unknown. */
  state(uid: string): WorkerState | undefined;
  /** True once termination was requested (terminating or terminated). */
  isTerminationRequested(uid: string): boolean;
  /** True when the pod was (or is being) terminated by an eviction. */
  isEvicted(uid: string): boolean;
  /** True while the pod might have running containers (known and not terminated). */
  couldHaveRunningContainers(uid: string): boolean;
  /** Pods whose workers are syncing (not terminating or waiting for their name), by UID. */
  activePods(): Pod[];
  /** Drops terminated workers of pods not in `desired`, and those asked to restart; returns the
   * known states (a desired pod absent from them needs a create). */
  syncKnownPods(desired: Set<string>): Map<string, WorkerState>;
  /** Drops the pod's worker if it is terminated and idle, so that the same UID can be started
   * again as a new instance (an evicted pod readmitted); returns whether it was dropped. */
  forgetTerminated(uid: string): boolean;
  /** Resolves when no worker is running or has pending work (tests, shutdown). */
  idle(): Promise<void>;
}

type SyncResult = { terminal: boolean; retry?: boolean } | "cancelled";

export function createPodWorkers(deps: PodWorkersDeps): PodWorkers {
  const workers = new Map<string, Worker>();
  const names = new StartedNames(workers);
  const idle = createIdleWaiters(() =>
    [...workers.values()].every((w) => !w.running && w.pending === undefined),
  );

  function schedule(w: Worker): void {
    if (w.running || w.blocked || w.pending === undefined) return;
    w.running = true;
    void runWorker(w).finally(() => {
      w.running = false;
      if (w.pending !== undefined && !w.blocked) schedule(w);
      else idle.notify();
    });
  }

  /** The sync step; "cancelled" when a kill aborted it (the kill is pending and runs next). */
  async function sync(w: Worker, update: PodUpdate): Promise<SyncResult> {
    const cancel = new AbortController();
    w.cancel = cancel;
    try {
      const result = await deps.syncPod(w.pod, update.type, cancel.signal);
      return cancel.signal.aborted ? "cancelled" : result;
    } catch (err) {
      if (cancel.signal.aborted) return "cancelled";
      throw err;
    } finally {
      w.cancel = undefined;
    }
  }

  /** The terminating and terminated steps; the worker ends terminated. */
  async function terminate(w: Worker, log: Logger): Promise<void> {
    const kill = w.kill ?? {};
    const grace = w.gracePeriodSeconds ?? w.pod.spec.terminationGracePeriodSeconds ?? 30;
    await deps.syncTerminatingPod(w.pod, grace, kill);
    await deps.syncTerminatedPod(w.pod, kill);
    w.state = "terminated";
    log.info(w.evicted ? "pod evicted and cleaned up" : "pod terminated");
    const next = names.release(w.fullName);
    if (next !== undefined) schedule(next);
  }

  /** After a step threw: a kill is retried after the back-off; a sync is requeued for after
   * the back-off (updates that came meanwhile are dropped: the requeued sync takes the newest
   * pod). */
  async function retryLater(w: Worker): Promise<void> {
    if (w.state === "terminated") return;
    if (w.kill === undefined) {
      w.pending = undefined;
      deps.requeue(w.uid, deps.errorBackoffMs);
      return;
    }
    if (w.pending === undefined) w.pending = { pod: w.pod, type: "kill", kill: w.kill };
    await deps.clock.sleep(deps.errorBackoffMs).catch(() => {});
  }

  async function runWorker(w: Worker): Promise<void> {
    const update = w.pending as PodUpdate;
    w.pending = undefined;
    w.pod = update.pod;
    const log = deps.logger.with({ pod: w.fullName, uid: w.uid });
    try {
      if (w.state === "syncing" && w.kill === undefined) {
        if (!names.mayStart(w)) {
          w.blocked = true;
          w.pending = update;
          log.info("waiting for the previous version of the pod to finish terminating");
          return;
        }
        const result = await sync(w, update);
        if (result === "cancelled") return;
        if (!result.terminal) {
          deps.requeue(w.uid, result.retry ? deps.errorBackoffMs : deps.resyncIntervalMs);
          return;
        }
        w.kill = {};
      }
      if (w.state === "syncing") w.state = "terminating";
      if (w.state === "terminating") await terminate(w, log);
    } catch (err) {
      log.error("pod sync failed; retrying", { error: err });
      await retryLater(w);
    }
  }

  function updatePod(update: PodUpdate): void {
    const uid = update.pod.metadata.uid;
    if (uid === undefined) throw new Error(`pod ${fullNameOf(update.pod)} has no uid`);
    let w = workers.get(uid);
    if (w === undefined) {
      // A kill for a pod never started: a terminated worker, so callers see it done.
      w = newWorker(update.pod, update.type === "kill" ? "terminated" : "syncing");
      workers.set(uid, w);
      if (w.state === "terminated") return;
    }
    if (mergeUpdate(w, update)) schedule(w);
  }

  function drop(uid: string, w: Worker): void {
    workers.delete(uid);
    names.forget(w.fullName, uid);
  }

  return {
    updatePod,
    state: (uid) => workers.get(uid)?.state,
    isTerminationRequested: (uid) => workers.get(uid)?.kill !== undefined,
    isEvicted: (uid) => workers.get(uid)?.evicted === true,
    couldHaveRunningContainers: (uid) => {
      const w = workers.get(uid);
      return w !== undefined && w.state !== "terminated";
    },
    activePods: () =>
      [...workers.values()].filter((w) => w.state === "syncing" && !w.blocked).map((w) => w.pod),
    syncKnownPods(desired) {
      for (const [uid, w] of workers) {
        const unwanted = !desired.has(uid) || w.restartRequested;
        if (unwanted && w.state === "terminated" && !w.running) drop(uid, w);
      }
      return new Map([...workers].map(([uid, w]) => [uid, w.state]));
    },
    forgetTerminated(uid) {
      const w = workers.get(uid);
      if (w === undefined || w.state !== "terminated" || w.running) return false;
      drop(uid, w);
      return true;
    },
    idle: () => idle.wait(),
  };
}

/** Promises that resolve once `isIdle()` holds when notify() is called. */
function createIdleWaiters(isIdle: () => boolean) {
  let waiters: (() => void)[] = [];
  return {
    notify(): void {
      if (!isIdle()) return;
      const ready = waiters;
      waiters = [];
      for (const w of ready) w();
    },
    wait(): Promise<void> {
      return isIdle() ? Promise.resolve() : new Promise<void>((r) => waiters.push(r));
    },
  };
}
