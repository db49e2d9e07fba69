// One pod's worker: its state, the update waiting to run, and how a new update folds into it.
//
// Invariants: `kill` is never cleared once set (a kill is never lost), the grace period only
// shrinks, and `evicted` is set only with `kill`.
import type { Pod } from "../../api/types.ts";
import type { KillOptions, PodUpdate, WorkerState } from "./types.ts";

export interface Worker {
  uid: string;
  /** namespace/name: only one UID of a static pod's name may run at a time. */
  fullName: string;
  pod: Pod;
  state: WorkerState;
  /** The next update to run; newer updates replace it, but never a pending kill. */
  pending: PodUpdate | undefined;
  /** A step runs now. */
  running: boolean;
  /** Set when termination was requested; never cleared. */
  kill: KillOptions | undefined;
  /** The grace period termination uses; the shortest one asked for. */
  gracePeriodSeconds: number | undefined;
  /** Terminated by an eviction (the kubelet's evicted state): its content is removed although
   * its manifest is still there, and it stays Failed/Evicted until readmitted. */
  evicted: boolean;
  /** Waiting for an older UID with the same full name to finish terminating. */
  blocked: boolean;
  /** Cancels the sync in flight (a kill does, as the kubelet's pod workers). */
  cancel: AbortController | undefined;
  /** A create arrived after the pod terminated: drop the worker so the pod starts anew. */
  restartRequested: boolean;
}

export const fullNameOf = (pod: Pod): string =>
  `${pod.metadata.namespace ?? "default"}/${pod.metadata.name}`;

export function newWorker(pod: Pod, state: WorkerState): Worker {
  return {
    uid: pod.metadata.uid as string,
    fullName: fullNameOf(pod),
    pod,
    state,
    pending: undefined,
    running: false,
    kill: state === "terminated" ? {} : undefined,
    gracePeriodSeconds: undefined,
    evicted: false,
    blocked: false,
    cancel: undefined,
    restartRequested: false,
  };
}

/**
 * Folds `update` into the worker. A kill is recorded (the shorter grace period wins, an eviction
 * marks the worker evicted), cancels the sync in flight, and ends a worker that never started;
 * a create for a terminated worker asks for a restart. Returns whether the worker now has work
 * to schedule.
 */
export function mergeUpdate(w: Worker, update: PodUpdate): boolean {
  if (w.state === "terminated") {
    if (update.type === "create") w.restartRequested = true;
    return false;
  }
  if (update.type === "kill") {
    w.kill = { ...w.kill, ...update.kill };
    if (update.kill?.evict) w.evicted = true;
    const g = update.kill?.gracePeriodSeconds;
    if (g !== undefined) w.gracePeriodSeconds = Math.min(g, w.gracePeriodSeconds ?? g);
    if (w.state === "syncing") w.state = "terminating";
    w.cancel?.abort(new Error("the pod is being terminated"));
    if (w.blocked) {
      // It never started: nothing to stop.
      w.blocked = false;
      w.state = "terminated";
      w.pending = undefined;
      return false;
    }
  }
  // A pending kill is never replaced by a sync; otherwise the newest update wins.
  const type = w.kill !== undefined ? "kill" : update.type;
  w.pending = { pod: update.pod, type, ...(w.kill ? { kill: w.kill } : {}) };
  return true;
}
