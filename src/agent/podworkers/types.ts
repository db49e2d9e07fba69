// The pod workers' vocabulary: updates, kill options, states, and the steps the workers call.
import type { Pod, PodCondition } from "../../api/types.ts";

export type UpdateType = "create" | "update" | "sync" | "kill";

/** The kubelet's pod worker states. An evicted pod is "terminated" with isEvicted() true. */
export type WorkerState = "syncing" | "terminating" | "terminated";

export interface KillOptions {
  /** Overrides the pod's terminationGracePeriodSeconds (never raises an earlier shorter one). */
  gracePeriodSeconds?: number;
  /** The terminal status reason, e.g. "Evicted" or a rejected admission. */
  reason?: string;
  message?: string;
  /** An eviction: the pod ends Failed with `reason`/`message`, and its content (containers,
   * volumes, logs) is removed once terminated although its manifest is still there. */
  evict?: boolean;
  /** Conditions to add to the pod's status, e.g. DisruptionTarget on an eviction. */
  conditions?: PodCondition[];
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
  /** Cleans up after a terminated pod (volumes, directories); containers may be kept for logs,
   * except after an eviction (`kill.evict`). */
  syncTerminatedPod(pod: Pod, kill: KillOptions): Promise<void>;
}
