// The agent's three pod-worker steps (kubelet's SyncPod, SyncTerminatingPod, SyncTerminatedPod):
// read the runtime's state, publish the pod's status, and have the runtime manager carry out the
// plan. The status is published again right after the runtime acted, not one relist later.
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { getPodQOS } from "../../api/index.ts";
import type { PodStatus as ApiPodStatus, Pod } from "../../api/types.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import type { PodStatus, RunningPod, SyncChanges } from "../kubecontainer/types.ts";
import type { KillOptions, PodSyncFns, UpdateType } from "../podworkers/index.ts";
import type { ProbeResults, SyncError } from "../status/index.ts";
import { generatePodStatus, type StatusManager, toRFC3339 } from "../status/index.ts";

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
    opts: {
      livenessFailed?: ReadonlySet<string>;
      startupFailed?: ReadonlySet<string>;
      signal?: AbortSignal;
    },
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
  /** The pod's cgroup (the container manager); absent: the runtime's default. */
  podCgroups?: {
    /** Creates the pod cgroup if missing; throws naming the cgroup. */
    ensure(pod: Pod): Promise<void>;
    /** Kills what is left in the pod cgroup and removes it. */
    remove(uid: string): Promise<void>;
  };
}

/** A PLEG cache entry as pod-sync reads it. */
export interface CachedStatus {
  status: PodStatus | undefined;
  error?: Error;
  /** When the status was read (epoch ms). */
  timestamp: number;
}

type SyncOptions = {
  livenessFailed?: ReadonlySet<string>;
  startupFailed?: ReadonlySet<string>;
  signal?: AbortSignal;
};

/** The status of a pod the runtime has nothing of. */
function emptyStatus(pod: Pod, now: number): PodStatus {
  const { uid = "", name, namespace = "default" } = pod.metadata;
  return { uid, name, namespace, ips: [], sandboxes: [], containers: [], timestamp: now };
}

function sameWaiting(
  a: ReadonlyMap<string, SyncError> | undefined,
  b: ReadonlyMap<string, SyncError>,
): boolean {
  if (a === undefined || a.size !== b.size) return false;
  for (const [name, e] of b) {
    const o = a.get(name);
    if (o?.reason !== e.reason || o.message !== e.message) return false;
  }
  return true;
}

export interface PodSync extends PodSyncFns {
  /** The last sync's waiting reasons per container name. */
  syncErrors(uid: string): ReadonlyMap<string, SyncError> | undefined;
  /** Publishes the Failed status of a pod admission rejected (it never starts). */
  reject(pod: Pod, reason: string, message: string): void;
  podDir(uid: string): string;
  /** Whether a sync is acting on the pod and reads its status into the cache when done. */
  readPending(uid: string): boolean;
  /** Whether `status` is the one the pod's last sync read back after acting and found nothing
   * more to do with (so a PLEG event for what it shows would start a sync with nothing to do). */
  settled(uid: string, status: PodStatus): boolean;
}

const uidOf = (pod: Pod) => pod.metadata.uid as string;

export function createPodSync(deps: PodSyncDeps): PodSync {
  const errors = new Map<string, ReadonlyMap<string, SyncError>>();
  /** When a sync last let the runtime act on the pod (epoch ms). */
  const lastActed = new Map<string, number>();
  /** Pods a sync is acting on; each such sync reads the pod's status when done. */
  const acting = new Set<string>();
  /** Per pod: the status its last sync read after acting, when that sync's plan for it was
   * empty. */
  const settledStatus = new Map<string, PodStatus>();

  async function readStatus(pod: Pod): Promise<PodStatus> {
    const { name, namespace = "default" } = pod.metadata;
    const status = await deps.runtime.getPodStatus(uidOf(pod), name, namespace);
    deps.updateCache(uidOf(pod), status);
    return status;
  }

  /** The status after a sync that acted, read with the fewest calls. */
  async function readStatusAfter(before: PodStatus, changes: SyncChanges): Promise<PodStatus> {
    const status = await deps.runtime.getPodStatusAfter(before, changes);
    deps.updateCache(before.uid, status);
    return status;
  }

  /** The status to plan from: the PLEG cache's when it is newer than our last action on the
   * pod (none for a pod never seen in the runtime and never acted on), else a fresh read. */
  async function statusForSync(pod: Pod): Promise<PodStatus> {
    const uid = uidOf(pod);
    if (deps.cachedStatus === undefined) return readStatus(pod);
    const entry = deps.cachedStatus(uid);
    const acted = lastActed.get(uid);
    if (entry === undefined && acted === undefined) return emptyStatus(pod, deps.clock.now());
    if (entry !== undefined && entry.error === undefined && entry.timestamp >= (acted ?? 0)) {
      return entry.status ?? emptyStatus(pod, entry.timestamp);
    }
    return readStatus(pod);
  }

  function publish(
    pod: Pod,
    runtime: PodStatus,
    extra: { terminating?: boolean; terminal?: boolean; kill?: KillOptions } = {},
  ): ApiPodStatus {
    const uid = uidOf(pod);
    const { kill, ...flags } = extra;
    const status = generatePodStatus({
      pod,
      runtime,
      now: deps.clock.now(),
      hostIP: deps.hostIP(),
      syncErrors: errors.get(uid),
      previous: deps.statusManager.getPodStatus(uid),
      ...(deps.readiness ? { readiness: deps.readiness } : {}),
      ...(deps.startup ? { startup: deps.startup } : {}),
      ...flags,
      // An eviction's status (the kubelet's podStatusFn): Failed, its reason and message.
      ...(kill?.evict && kill.reason !== undefined
        ? { failure: { reason: kill.reason, message: kill.message ?? "" } }
        : {}),
      ...(kill?.conditions ? { extraConditions: kill.conditions } : {}),
    });
    deps.statusManager.setPodStatus(uid, status);
    return status;
  }

  const podDir = (uid: string) => join(deps.rootDir, "pods", uid);

  async function runningPodOf(pod: Pod): Promise<RunningPod> {
    const uid = uidOf(pod);
    const found = (await deps.runtime.getPods()).find((p) => p.uid === uid);
    return (
      found ?? {
        uid,
        name: pod.metadata.name,
        namespace: pod.metadata.namespace ?? "default",
        sandboxes: [],
        containers: [],
      }
    );
  }

  return {
    podDir,
    syncErrors: (uid) => errors.get(uid),
    readPending: (uid) => acting.has(uid),
    settled: (uid, status) => settledStatus.get(uid) === status,

    async syncPod(pod: Pod, _type: UpdateType, signal?: AbortSignal) {
      const uid = uidOf(pod);
      const before = await statusForSync(pod);
      const status = publish(pod, before);
      if (status.phase === "Succeeded" || status.phase === "Failed") return { terminal: true };
      const prepare = async () => {
        await mkdir(podDir(uid), { recursive: true, mode: 0o750 });
        await deps.podCgroups?.ensure(pod).catch((err: Error) => {
          throw new Error(
            `Cannot create the cgroup of pod ${JSON.stringify(pod.metadata.name)}: ${err.message}`,
          );
        });
      };
      if (before.sandboxes.length === 0 && deps.prepareInTurn)
        await deps.prepareInTurn(pod, prepare, signal);
      else await prepare();
      // kubelet's WaitForAttachAndMount: no sandbox and no container before the volumes are
      // there; the pod waits in ContainerCreating and is synced again (at once when an object
      // it reads appears).
      const running = before.sandboxes.length > 0 || before.containers.length > 0;
      const volumes = await deps.volumes?.mountPod(pod, running);
      if (volumes && !volumes.ready) return { terminal: false, retry: true };
      const livenessFailed = deps.livenessFailed?.(uid);
      const startupFailed = deps.startupFailed?.(uid);
      const opts: SyncOptions = {
        ...(livenessFailed ? { livenessFailed } : {}),
        ...(startupFailed ? { startupFailed } : {}),
        ...(signal ? { signal } : {}),
      };
      const acts = deps.hasActions?.(pod, before, opts) ?? true;
      if (acts) {
        lastActed.set(uid, deps.clock.now());
        acting.add(uid);
      }
      try {
        const result = await deps.runtime.syncPod(pod, before, opts);
        // Cancelled by a kill: the terminating step reads and publishes the pod next.
        if (signal?.aborted) return { terminal: false };
        const unchanged = sameWaiting(errors.get(uid), result.waiting);
        errors.set(uid, result.waiting);
        const retry = result.waiting.size > 0;
        if (!acts && unchanged) return { terminal: false, retry };
        const read = acts ? await readStatusAfter(before, result.changes) : before;
        if (acts && !(deps.hasActions?.(pod, read, opts) ?? true)) settledStatus.set(uid, read);
        else settledStatus.delete(uid);
        const after = publish(pod, read);
        return { terminal: after.phase === "Succeeded" || after.phase === "Failed", retry };
      } finally {
        acting.delete(uid);
      }
    },

    async syncTerminatingPod(pod: Pod, gracePeriodSeconds: number, kill: KillOptions) {
      const uid = uidOf(pod);
      acting.add(uid);
      try {
        const running = await runningPodOf(pod);
        const terminal = !deps.isDesired(uid) || kill.reason !== undefined;
        publish(pod, await readStatus(pod), { terminating: true, terminal, kill });
        lastActed.set(uid, deps.clock.now());
        await deps.runtime.killPod(pod, running, gracePeriodSeconds);
        publish(pod, await readStatus(pod), { terminating: true, terminal: true, kill });
      } finally {
        acting.delete(uid);
      }
    },

    async syncTerminatedPod(pod: Pod, kill: KillOptions) {
      const uid = uidOf(pod);
      const desired = deps.isDesired(uid);
      if (desired && !kill.evict) {
        // A finished pod keeps its containers for logs and status; its tmpfs volumes go, as the
        // kubelet tears down the volumes of terminated pods.
        await deps.volumes?.unmountPod(uid);
        return;
      }
      // An evicted pod does not (the kubelet's ShouldPodContentBeRemoved): its writable layers,
      // logs and volumes go although its manifest is still there.
      const running = await runningPodOf(pod);
      await deps.runtime.removePod(running);
      await deps.podCgroups
        ?.remove(uid)
        .catch((error) => deps.logger.warn("could not remove a pod cgroup", { uid, error }));
      if (deps.volumes) await deps.volumes.removePod(uid);
      else await rm(podDir(uid), { recursive: true, force: true });
      errors.delete(uid);
      lastActed.delete(uid);
      settledStatus.delete(uid);
      deps.updateCache(uid, emptyStatus(pod, deps.clock.now()));
      if (!desired) deps.statusManager.removePod(uid);
    },

    reject(pod, reason, message) {
      // The kubelet's rejectPod: only phase, reason and message (no container statuses, so
      // `get pods` shows the reason), the message prefixed as the kubelet prefixes it.
      deps.statusManager.setPodStatus(uidOf(pod), {
        phase: "Failed",
        reason,
        message: `Pod was rejected: ${message}`,
        qosClass: getPodQOS(pod),
        startTime: toRFC3339(deps.clock.now()),
      });
    },
  };
}
