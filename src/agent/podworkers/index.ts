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
import type { PodSyncFns, PodUpdate, WorkerState } from "./types.ts";
import { PodWorkerSet } from "./workers.ts";

export type { KillOptions, PodSyncFns, PodUpdate, UpdateType, WorkerState } from "./types.ts";

export interface PodWorkersDeps extends PodSyncFns {
  clock: Clock;
  logger: Logger;
  /** Called after each sync with the delay until the pod should sync again (error → backoff). */
  requeue(uid: string, delayMs: number): void;
  resyncIntervalMs: number;
  /** Delay before retrying a sync that threw or that reported a back-off. */
  errorBackoffMs: number;
  /** Aborted when the agent stops: no step starts after it and a failed step is not retried
   * (a pod left terminating is finished by the next agent). */
  signal?: AbortSignal;
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

export function createPodWorkers(deps: PodWorkersDeps): PodWorkers {
  return new PodWorkerSet(deps);
}
