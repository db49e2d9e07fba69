// The agent's pod workers: the pod sync steps, the work queue they requeue into, and the resync
// interval and error back-off from the agent config. Also the port through which the prober,
// created before the workers (pod sync reads its results), reaches them.
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { createPodWorkers, type PodWorkers } from "./index.ts";
import type { PodSyncFns, PodUpdate } from "./types.ts";

interface PodWorkersSettings {
  syncFrequency: number;
  crashLoopBackOffBase: number;
  imagePullBackOffBase: number;
}

export interface AgentPodWorkersInput {
  config: PodWorkersSettings;
  clock: Clock;
  logger: Logger;
  podSync: PodSyncFns;
  /** Marks a pod to sync again after `delayMs` (the work queue). */
  requeue(uid: string, delayMs: number): void;
  /** Aborted when the agent stops. */
  signal: AbortSignal;
  /** Bound to the workers once they exist. */
  port?: PodWorkersPort;
}

export function setupPodWorkers(input: AgentPodWorkersInput): PodWorkers {
  const { config: settings, podSync } = input;
  const workers = createPodWorkers({
    syncPod: (pod, type, s) => podSync.syncPod(pod, type, s),
    syncTerminatingPod: (pod, grace, kill) => podSync.syncTerminatingPod(pod, grace, kill),
    syncTerminatedPod: (pod, kill) => podSync.syncTerminatedPod(pod, kill),
    clock: input.clock,
    logger: input.logger.with({ component: "podworkers" }),
    requeue: input.requeue,
    resyncIntervalMs: settings.syncFrequency,
    // As the kubelet's pod worker back-off, which equals its crash-loop and pull back-off base.
    errorBackoffMs: Math.min(settings.crashLoopBackOffBase, settings.imagePullBackOffBase),
    signal: input.signal,
  });
  input.port?.bind(workers);
  return workers;
}

/**
 * The pod workers as a manager created before them reaches them (the prober, whose results pod
 * sync reads): bound by setupPodWorkers. Called before that, it throws: nothing may ask for a
 * sync before there are workers to carry it out.
 */
export class PodWorkersPort {
  private workers: PodWorkers | undefined;

  bind(workers: PodWorkers): void {
    this.workers = workers;
  }

  updatePod(update: PodUpdate): void {
    this.bound().updatePod(update);
  }

  isTerminationRequested(uid: string): boolean {
    return this.bound().isTerminationRequested(uid);
  }

  private bound(): PodWorkers {
    if (this.workers === undefined) throw new Error("the pod workers are not created yet");
    return this.workers;
  }
}
