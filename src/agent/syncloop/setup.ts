// The agent's sync loop: its inputs (the pod config's updates, PLEG's events), the pod workers
// it dispatches to, admission, the housekeeping of what no source wants, and readmission of
// evicted pods; it syncs the pods that read a ConfigMap or Secret that changed.
import type { Pod } from "../../api/types.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { type EventRecorder, podRef } from "../events/index.ts";
import type { RunningPod } from "../kubecontainer/types.ts";
import type { AdmitHandlers } from "../lifecycle/index.ts";
import type { PodCache, PodLifecycleEvent } from "../pleg/index.ts";
import type { PodManager } from "../podmanager/index.ts";
import type { PodWorkers } from "../podworkers/index.ts";
import type { PodConfig } from "../sources/index.ts";
import type { StatusManager } from "../status/index.ts";
import { createSyncLoop, type SyncLoop } from "./index.ts";
import type { WorkQueue } from "./work-queue.ts";

export interface AgentSyncLoopInput {
  config: { rootDir: string; podLogsDir: string; maxPods: number; housekeepingInterval: number };
  clock: Clock;
  logger: Logger;
  pods: PodManager;
  workQueue: WorkQueue;
  podConfig: Pick<PodConfig, "updates" | "seenAllSources">;
  objects: { subscribe(fn: (changed: ReadonlySet<string>) => void): () => void };
  pleg: { next(signal: AbortSignal): Promise<PodLifecycleEvent> };
  podCache: Pick<PodCache, "delete">;
  health: { healthy(): boolean };
  workers: PodWorkers;
  podSync: { reject(pod: Pod, reason: string, message: string): void };
  admitHandlers: AdmitHandlers;
  recorder: Pick<EventRecorder, "event">;
  statusManager: Pick<StatusManager, "uids" | "removePod">;
  /** The runtime's pods, maybe a moment old (PLEG's listing). */
  runtimePods(): Promise<RunningPod[]>;
  runtime: {
    killPod(pod: Pod | undefined, running: RunningPod): Promise<void>;
    removePod(running: RunningPod): Promise<void>;
  };
  cm: { housekeeping(active: readonly Pod[], keep: (uid: string) => boolean): Promise<void> };
  eviction: { readmissionsDue(): string[]; forgetReadmission(uid: string): void };
  volumes: { removePod(uid: string): Promise<unknown> };
}

export function setupSyncLoop(input: AgentSyncLoopInput): SyncLoop {
  const { config: settings, workers, podConfig, statusManager, eviction, runtime } = input;
  const loop = createSyncLoop({
    ...{ clock: input.clock, logger: input.logger },
    ...{ podManager: input.pods, workQueue: input.workQueue },
    nextConfigUpdate: (s) => podConfig.updates.next(s),
    nextPLEGEvent: (s) => input.pleg.next(s),
    seenAllSources: () => podConfig.seenAllSources(),
    runtimeHealthy: () => input.health.healthy(),
    updatePod: (update) => workers.updatePod(update),
    workerState: (uid) => workers.state(uid),
    couldHaveRunningContainers: (uid) => workers.couldHaveRunningContainers(uid),
    syncKnownPods: (desired) => workers.syncKnownPods(desired),
    forgetWorker: (uid) => workers.forgetTerminated(uid),
    rejectPod: (pod, reason, message) => input.podSync.reject(pod, reason, message),
    event: (pod, type, reason, message) => input.recorder.event(podRef(pod), type, reason, message),
    statusUids: () => statusManager.uids(),
    removeStatus: (uid) => statusManager.removePod(uid),
    forgetCache: (uid) => input.podCache.delete(uid),
    runtimePods: () => input.runtimePods(),
    removeOrphan: async (rp) => {
      await runtime.killPod(undefined, rp);
      await runtime.removePod(rp);
    },
    rootDir: settings.rootDir,
    podLogsDir: settings.podLogsDir,
    maxPods: settings.maxPods,
    admitHandlers: input.admitHandlers,
    cgroupHousekeeping: (active, keep) => input.cm.housekeeping(active, keep),
    readmissions: {
      due: () => eviction.readmissionsDue(),
      forget: (uid) => eviction.forgetReadmission(uid),
    },
    housekeepingIntervalMs: settings.housekeepingInterval,
    removePodDir: (uid) => input.volumes.removePod(uid),
  });
  input.objects.subscribe((keys) => loop.handleObjectsChanged(keys));
  return loop;
}
