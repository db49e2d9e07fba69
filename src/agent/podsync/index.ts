// The agent's three pod-worker steps (kubelet's SyncPod, SyncTerminatingPod, SyncTerminatedPod):
// read the runtime's state, publish the pod's status, and have the runtime manager carry out the
// plan. The status is published again right after the runtime acted, not one relist later.
import type { Pod, ResourceStatus } from "../../api/types.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import type { DevicePreparation } from "../cm/devicemanager/index.ts";
import type { PodStatus, RunningPod, SyncChanges } from "../kubecontainer/types.ts";
import type { PodSyncFns } from "../podworkers/index.ts";
import type { ProbeResults, StatusManager, SyncError } from "../status/index.ts";
import { PodSyncer } from "./syncer.ts";

export type { DevicePreparation };

/** The runtime manager as the agent uses it. */
export interface PodRuntime {
  getPods(): Promise<RunningPod[]>;
  getPodStatus(uid: string, name: string, namespace: string): Promise<PodStatus>;
  /** The status after a sync that planned from `before` and made `changes` (what the sync
   * touched read again, the rest taken from `before`). */
  getPodStatusAfter(before: PodStatus, changes: SyncChanges): Promise<PodStatus>;
  syncPod(
    pod: Pod,
    status: PodStatus,
    opts: SyncOptions,
  ): Promise<{ waiting: ReadonlyMap<string, SyncError>; changes: SyncChanges }>;
  killPod(pod: Pod | undefined, running: RunningPod, gracePeriodSeconds?: number): Promise<void>;
  removePod(running: RunningPod): Promise<void>;
}

export interface PodSyncDeps {
  runtime: PodRuntime;
  statusManager: StatusManager;
  clock: Clock;
  logger: Logger;
  rootDir: string;
  hostIP: () => string;
  /** Stores a fresh runtime status in the PLEG cache. */
  updateCache(uid: string, status: PodStatus): void;
  /** Whether the pod is still wanted by a source (false once its manifest is gone). */
  isDesired(uid: string): boolean;
  /** The PLEG cache's entry for the pod; when given, a sync plans from it instead of reading
   * the runtime, as long as it was read after this agent last acted on the pod. */
  cachedStatus?: (uid: string) => CachedStatus | undefined;
  /** Whether the runtime manager would act on `status` (a non-empty plan); when it would not,
   * the status is not read again after the sync. Absent: always read again. */
  hasActions?: (pod: Pod, status: PodStatus, opts: SyncOptions) => boolean;
  /** IDs of the pod's containers whose liveness probe settled on failure. */
  livenessFailed?: (uid: string) => ReadonlySet<string>;
  /** IDs of the pod's containers whose startup probe settled on failure. */
  startupFailed?: (uid: string) => ReadonlySet<string>;
  /** Readiness and startup probe results by container ID, for the published status. */
  readiness?: ProbeResults;
  startup?: ProbeResults;
  /** Runs a new pod's preparation (its folder and cgroup) in the order pods start in (see
   * maxParallelStarts), so that in a burst the first pods reach the runtime first. */
  prepareInTurn?: (pod: Pod, prepare: () => Promise<void>, signal?: AbortSignal) => Promise<void>;
  /** The pod's volumes (the volume manager); absent: the pod folder is removed as it is. */
  volumes?: {
    /** Sets up the pod's volumes; `ready` false while one it never had is missing. */
    mountPod(pod: Pod, podRunning: boolean): Promise<{ ready: boolean }>;
    /** Unmounts what is mounted under the pod's folder (a finished pod keeps its folder). */
    unmountPod(uid: string): Promise<boolean>;
    /** Unmounts what is mounted under the pod's folder and removes it. */
    removePod(uid: string): Promise<boolean>;
  };
  /** The pod's devices (the device manager), allocated before its first container starts;
   * absent: no devices. */
  devices?: {
    prepare(pod: Pod, signal?: AbortSignal): Promise<DevicePreparation>;
    /** The devices a container holds, for its status. */
    resourceStatus(podUid: string, containerName: string): ResourceStatus[];
  };
  /** Records an event about the pod; absent: none. */
  event?: (pod: Pod, type: "Normal" | "Warning", reason: string, message: string) => void;
  /** The pod's cgroup (the container manager); absent: the runtime's default. */
  podCgroups?: {
    /** Creates the pod cgroup if missing; throws naming the cgroup. */
    ensure(pod: Pod): Promise<void>;
    /** Kills what is left in the pod cgroup and removes it. */
    remove(uid: string): Promise<void>;
  };
}

/** The options of a runtime sync: probes settled on failure, the kill's cancellation, and
 * where a running pull's figures go. */
export type SyncOptions = {
  livenessFailed?: ReadonlySet<string>;
  startupFailed?: ReadonlySet<string>;
  signal?: AbortSignal;
  /** Called with a container's waiting message while its image is pulled. */
  onPullProgress?: (container: string, message: string) => void;
};

/** A PLEG cache entry as pod-sync reads it. */
export interface CachedStatus {
  status: PodStatus | undefined;
  error?: Error;
  /** When the status was read (monotonic ms, as PodStatus.timestamp). */
  timestamp: number;
}

export interface PodSync extends PodSyncFns {
  /** The last sync's waiting reasons per container name. */
  syncErrors(uid: string): ReadonlyMap<string, SyncError> | undefined;
  /** Publishes the Failed status of a pod admission rejected (it never starts). */
  reject(pod: Pod, reason: string, message: string): void;
  podDir(uid: string): string;
  /** The pods whose last sync waited for a device plugin to register. */
  waitingForDevices(): string[];
  /** Whether a sync is acting on the pod and reads its status into the cache when done. */
  readPending(uid: string): boolean;
  /** Whether `status` is the one the pod's last sync read back after acting and found nothing
   * more to do with (so a PLEG event for what it shows would start a sync with nothing to do). */
  settled(uid: string, status: PodStatus): boolean;
}

export function createPodSync(deps: PodSyncDeps): PodSync {
  return new PodSyncer(deps);
}
