// The agent's three pod-worker steps (kubelet's SyncPod, SyncTerminatingPod, SyncTerminatedPod):
// read the runtime's state, publish the pod's status, and have the runtime manager carry out the
// plan. The status is published again right after the runtime acted, not one relist later.
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { PodStatus as ApiPodStatus, Pod } from "../api/types.ts";
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import type { PodStatus, RunningPod } from "./kubecontainer/types.ts";
import type { KillOptions, PodSyncFns, UpdateType } from "./podworkers/index.ts";
import type { SyncError } from "./status/index.ts";
import { generatePodStatus, type StatusManager } from "./status/index.ts";

/** The runtime manager as the agent uses it. */
export interface PodRuntime {
  getPods(): Promise<RunningPod[]>;
  getPodStatus(uid: string, name: string, namespace: string): Promise<PodStatus>;
  syncPod(
    pod: Pod,
    status: PodStatus,
    opts: { livenessFailed?: ReadonlySet<string> },
  ): Promise<{ waiting: ReadonlyMap<string, SyncError> }>;
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
  /** Containers a liveness or startup probe found failing (none until probes exist). */
  livenessFailed?: (uid: string) => ReadonlySet<string>;
}

export interface PodSync extends PodSyncFns {
  /** The last sync's waiting reasons per container name. */
  syncErrors(uid: string): ReadonlyMap<string, SyncError> | undefined;
  /** Publishes a Failed status for a pod that was never started (admission rejection). */
  reject(pod: Pod, reason: string, message: string): void;
  podDir(uid: string): string;
}

const uidOf = (pod: Pod) => pod.metadata.uid as string;

export function createPodSync(deps: PodSyncDeps): PodSync {
  const errors = new Map<string, ReadonlyMap<string, SyncError>>();

  async function readStatus(pod: Pod): Promise<PodStatus> {
    const { name, namespace = "default" } = pod.metadata;
    const status = await deps.runtime.getPodStatus(uidOf(pod), name, namespace);
    deps.updateCache(uidOf(pod), status);
    return status;
  }

  function publish(
    pod: Pod,
    runtime: PodStatus,
    extra: { terminating?: boolean; terminal?: boolean } = {},
  ): ApiPodStatus {
    const uid = uidOf(pod);
    const status = generatePodStatus({
      pod,
      runtime,
      now: deps.clock.now(),
      hostIP: deps.hostIP(),
      syncErrors: errors.get(uid),
      previous: deps.statusManager.getPodStatus(uid),
      ...extra,
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
        sandboxIds: [],
        containers: [],
      }
    );
  }

  return {
    podDir,
    syncErrors: (uid) => errors.get(uid),

    async syncPod(pod: Pod, _type: UpdateType) {
      const uid = uidOf(pod);
      const before = await readStatus(pod);
      const status = publish(pod, before);
      if (status.phase === "Succeeded" || status.phase === "Failed") return { terminal: true };
      await mkdir(podDir(uid), { recursive: true, mode: 0o750 });
      const livenessFailed = deps.livenessFailed?.(uid);
      const result = await deps.runtime.syncPod(
        pod,
        before,
        livenessFailed ? { livenessFailed } : {},
      );
      errors.set(uid, result.waiting);
      const after = publish(pod, await readStatus(pod));
      return { terminal: after.phase === "Succeeded" || after.phase === "Failed" };
    },

    async syncTerminatingPod(pod: Pod, gracePeriodSeconds: number, kill: KillOptions) {
      const running = await runningPodOf(pod);
      const terminal = !deps.isDesired(uidOf(pod)) || kill.reason !== undefined;
      publish(pod, await readStatus(pod), { terminating: true, terminal });
      await deps.runtime.killPod(pod, running, gracePeriodSeconds);
      publish(pod, await readStatus(pod), { terminating: true, terminal: true });
    },

    async syncTerminatedPod(pod: Pod) {
      const uid = uidOf(pod);
      if (deps.isDesired(uid)) return; // a finished pod keeps its containers for logs and status
      const running = await runningPodOf(pod);
      await deps.runtime.removePod(running);
      await rm(podDir(uid), { recursive: true, force: true });
      errors.delete(uid);
      deps.statusManager.removePod(uid);
    },

    reject(pod, reason, message) {
      const status = generatePodStatus({
        pod,
        runtime: undefined,
        now: deps.clock.now(),
        hostIP: deps.hostIP(),
        terminal: true,
        failure: { reason, message },
      });
      deps.statusManager.setPodStatus(uidOf(pod), status);
    },
  };
}
