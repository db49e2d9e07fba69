// Pod workers: one serialized worker per pod UID, moving each pod through
// sync → terminating → terminated, as the kubelet's pod workers do.
//
// Invariants:
// - At most one sync/terminate call runs per UID at a time; updates arriving meanwhile are merged
//   into one pending update (the newest pod wins) and run next.
// - A kill is never lost: once termination is requested, later updates cannot cancel it; only
//   the grace period may shrink. A kill cancels the pod's sync in flight (its signal aborts), so
//   termination need not wait for a slow pull or a queued start.
// - Once a pod is terminated its worker ignores everything until a sync of known pods drops it.
//   A create for a terminated UID (the same pod desired again) is remembered, and the next sync
//   of known pods drops that worker even though the pod is desired, so that the caller starts it
//   afresh (the kubelet's restartRequested).
// - Static pods: only one UID per full name (namespace/name) may run at once. A new UID for a name
//   whose old UID is still terminating waits, and starts when the old one is terminated.
import type { Pod } from "../../api/types.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";

export type UpdateType = "create" | "update" | "sync" | "kill";
export type WorkerState = "syncing" | "terminating" | "terminated";

export interface KillOptions {
  /** Overrides the pod's terminationGracePeriodSeconds (never raises an earlier shorter one). */
  gracePeriodSeconds?: number;
  /** The terminal status reason, e.g. "Evicted" or a rejected admission. */
  reason?: string;
  message?: string;
}

export interface PodUpdate {
  pod: Pod;
  type: UpdateType;
  kill?: KillOptions;
}

/** What the workers call; each returns when the step is done. */
export interface PodSyncFns {
  /** Makes the runtime match the pod. `terminal`: the pod will not run again; `retry`: a
   * container waits on a back-off (crash loop, image pull), so sync again after the error
   * back-off rather than the resync interval. `signal` aborts when a kill cancels the sync. */
  syncPod(
    pod: Pod,
    type: UpdateType,
    signal?: AbortSignal,
  ): Promise<{ terminal: boolean; retry?: boolean }>;
  /** Stops every container of the pod within the grace period. */
  syncTerminatingPod(pod: Pod, gracePeriodSeconds: number, kill: KillOptions): Promise<void>;
  /** Cleans up after a terminated pod (volumes, directories); containers may be kept for logs. */
  syncTerminatedPod(pod: Pod): Promise<void>;
}

export interface PodWorkersDeps extends PodSyncFns {
  clock: Clock;
  logger: Logger;
  /** Called after each sync with the delay until the pod should sync again (error → backoff). */
  requeue(uid: string, delayMs: number): void;
  resyncIntervalMs: number;
  /** Delay before retrying a sync that threw or that reported a back-off. */
  errorBackoffMs: number;
}

interface Worker {
  uid: string;
  fullName: string;
  pod: Pod;
  state: WorkerState;
  pending: PodUpdate | undefined;
  running: boolean;
  /** Set when termination was requested; never cleared. */
  kill: KillOptions | undefined;
  gracePeriodSeconds: number | undefined;
  /** Waiting for an older UID with the same full name to finish terminating. */
  blocked: boolean;
  /** Cancels the sync in flight (a kill does, as the kubelet's pod workers). */
  cancel: AbortController | undefined;
  /** A create arrived after the pod terminated: drop the worker so the pod starts anew. */
  restartRequested?: boolean;
}

export interface PodWorkers {
  /** Queues an update for the pod's worker; starts the worker if idle. */
  updatePod(update: PodUpdate): void;
  /** The worker's state, or undefined if the UID is unknown. */
  state(uid: string): WorkerState | undefined;
  /** True once termination was requested (terminating or terminated). */
  isTerminationRequested(uid: string): boolean;
  /** True while the pod might have running containers (known and not terminated). */
  couldHaveRunningContainers(uid: string): boolean;
  /** Pods whose workers are not terminated, by UID. */
  activePods(): Pod[];
  /** Drops terminated workers of pods not in `desired`, and those asked to restart; returns the
   * known states (a desired pod absent from them needs a create). */
  syncKnownPods(desired: Set<string>): Map<string, WorkerState>;
  /** Resolves when no worker is running or has pending work (tests, shutdown). */
  idle(): Promise<void>;
}

const fullNameOf = (pod: Pod) => `${pod.metadata.namespace ?? "default"}/${pod.metadata.name}`;

export function createPodWorkers(deps: PodWorkersDeps): PodWorkers {
  const workers = new Map<string, Worker>();
  /** full name → the UID allowed to run for it. */
  const started = new Map<string, string>();
  let idleWaiters: (() => void)[] = [];

  const isIdle = () => [...workers.values()].every((w) => !w.running && w.pending === undefined);
  const notifyIdle = () => {
    if (!isIdle()) return;
    const waiters = idleWaiters;
    idleWaiters = [];
    for (const w of waiters) w();
  };

  function mayStart(w: Worker): boolean {
    const owner = started.get(w.fullName);
    if (owner === undefined || owner === w.uid) {
      started.set(w.fullName, w.uid);
      return true;
    }
    const other = workers.get(owner);
    if (other === undefined || other.state === "terminated") {
      started.set(w.fullName, w.uid);
      return true;
    }
    return false;
  }

  function unblockWaiters(fullName: string): void {
    if (started.get(fullName) !== undefined) {
      const owner = workers.get(started.get(fullName) as string);
      if (owner !== undefined && owner.state !== "terminated") return;
      started.delete(fullName);
    }
    for (const w of workers.values()) {
      if (w.fullName === fullName && w.blocked) {
        w.blocked = false;
        schedule(w);
        return;
      }
    }
  }

  function schedule(w: Worker): void {
    if (w.running || w.blocked || w.pending === undefined) return;
    w.running = true;
    void runWorker(w).finally(() => {
      w.running = false;
      if (w.pending !== undefined && !w.blocked) schedule(w);
      else notifyIdle();
    });
  }

  async function runWorker(w: Worker): Promise<void> {
    const update = w.pending as PodUpdate;
    w.pending = undefined;
    w.pod = update.pod;
    const log = deps.logger.with({ pod: w.fullName, uid: w.uid });
    let cancel: AbortController | undefined;
    try {
      if (w.state === "syncing" && w.kill === undefined) {
        if (!mayStart(w)) {
          w.blocked = true;
          w.pending = update;
          log.info("waiting for the previous version of the pod to finish terminating");
          return;
        }
        cancel = new AbortController();
        w.cancel = cancel;
        let result: { terminal: boolean; retry?: boolean };
        try {
          result = await deps.syncPod(w.pod, update.type, cancel.signal);
        } finally {
          w.cancel = undefined;
        }
        if (cancel.signal.aborted) return; // the kill that cancelled it is pending
        const { terminal, retry } = result;
        if (!terminal) {
          deps.requeue(w.uid, retry ? deps.errorBackoffMs : deps.resyncIntervalMs);
          return;
        }
        w.state = "terminating";
        w.kill = {};
      }
      if (w.state === "syncing") w.state = "terminating";
      if (w.state === "terminating") {
        const grace = w.gracePeriodSeconds ?? w.pod.spec.terminationGracePeriodSeconds ?? 30;
        await deps.syncTerminatingPod(w.pod, grace, w.kill ?? {});
        await deps.syncTerminatedPod(w.pod);
        w.state = "terminated";
        log.info("pod terminated");
        unblockWaiters(w.fullName);
      }
    } catch (err) {
      // A sync cancelled by a kill: the kill is pending and runs next, with no back-off.
      if (cancel?.signal.aborted) return;
      log.error("pod sync failed; retrying", { error: err });
      if (w.state !== "terminated") {
        // Retry the same step: a kill stays requested; a sync is retried after the backoff.
        if (w.pending === undefined) w.pending = { pod: w.pod, type: w.kill ? "kill" : "sync" };
        if (w.kill === undefined) {
          w.pending = undefined;
          deps.requeue(w.uid, deps.errorBackoffMs);
        } else {
          await deps.clock.sleep(deps.errorBackoffMs).catch(() => {});
        }
      }
    }
  }

  function updatePod(update: PodUpdate): void {
    const uid = update.pod.metadata.uid;
    if (uid === undefined) throw new Error(`pod ${fullNameOf(update.pod)} has no uid`);
    let w = workers.get(uid);
    if (w === undefined) {
      if (update.type === "kill") {
        // Nothing was ever started for it: record a terminated worker so callers see it done.
        workers.set(uid, newWorker(update.pod, "terminated"));
        return;
      }
      w = newWorker(update.pod, "syncing");
      workers.set(uid, w);
    }
    if (w.state === "terminated") {
      if (update.type === "create") w.restartRequested = true;
      return;
    }
    if (update.type === "kill") {
      w.kill = { ...w.kill, ...update.kill };
      const g = update.kill?.gracePeriodSeconds;
      if (g !== undefined) w.gracePeriodSeconds = Math.min(g, w.gracePeriodSeconds ?? g);
      if (w.state === "syncing") w.state = "terminating";
      w.cancel?.abort(new Error("the pod is being terminated"));
      if (w.blocked) {
        // It never started: nothing to stop.
        w.blocked = false;
        w.state = "terminated";
        w.pending = undefined;
        return;
      }
    }
    // A pending kill is never replaced by a sync; otherwise the newest update wins.
    const type = w.kill !== undefined ? "kill" : update.type;
    w.pending = { pod: update.pod, type, ...(w.kill ? { kill: w.kill } : {}) };
    schedule(w);
  }

  function newWorker(pod: Pod, state: WorkerState): Worker {
    return {
      uid: pod.metadata.uid as string,
      fullName: fullNameOf(pod),
      pod,
      state,
      pending: undefined,
      running: false,
      kill: state === "terminated" ? {} : undefined,
      gracePeriodSeconds: undefined,
      blocked: false,
      cancel: undefined,
    };
  }

  return {
    updatePod,
    state: (uid) => workers.get(uid)?.state,
    isTerminationRequested: (uid) => workers.get(uid)?.kill !== undefined,
    couldHaveRunningContainers: (uid) => {
      const w = workers.get(uid);
      return w !== undefined && w.state !== "terminated";
    },
    activePods: () =>
      [...workers.values()].filter((w) => w.state === "syncing" && !w.blocked).map((w) => w.pod),
    syncKnownPods(desired) {
      for (const [uid, w] of workers) {
        const unwanted = !desired.has(uid) || w.restartRequested === true;
        if (unwanted && w.state === "terminated" && !w.running) {
          workers.delete(uid);
          if (started.get(w.fullName) === uid) started.delete(w.fullName);
        }
      }
      return new Map([...workers].map(([uid, w]) => [uid, w.state]));
    },
    idle: () =>
      isIdle() ? Promise.resolve() : new Promise<void>((resolve) => idleWaiters.push(resolve)),
  };
}
