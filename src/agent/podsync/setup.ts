// The agent's pod sync: the runtime manager and its planner, the pod cache it shares with PLEG,
// the pod manager (whether a pod is still wanted), the volumes, the pod cgroups and the probe
// results.
import type { Pod } from "../../api/types.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { type EventRecorder, podRef } from "../events/index.ts";
import { computePodActions, planSteps, type RuntimeManager } from "../kuberuntime/index.ts";
import type { PodCache } from "../pleg/index.ts";
import type { StatusManager } from "../status/index.ts";
import { createPodSync, type PodSync, type PodSyncDeps } from "./index.ts";

export interface AgentPodSyncInput {
  config: { rootDir: string };
  hostIP: string;
  runtime: RuntimeManager;
  statusManager: StatusManager;
  clock: Clock;
  logger: Logger;
  /** The pod cache PLEG writes. */
  podCache: PodCache;
  /** The pod manager: whether a source still wants the pod. */
  pods: { has(uid: string): boolean };
  volumes: NonNullable<PodSyncDeps["volumes"]>;
  /** The pod's devices (the device manager). */
  devices: NonNullable<PodSyncDeps["devices"]>;
  recorder: Pick<EventRecorder, "event">;
  /** The pod cgroups (the container manager). */
  cm: { ensurePodCgroup(pod: Pod): Promise<void>; removePodCgroup(uid: string): Promise<void> };
  /** The prober's results. */
  prober: {
    failed(kind: "liveness" | "startup", uid: string): ReadonlySet<string>;
    readiness: NonNullable<PodSyncDeps["readiness"]>;
    startup: NonNullable<PodSyncDeps["startup"]>;
  };
}

export function setupPodSync(input: AgentPodSyncInput): PodSync {
  const { runtime, podCache: cache, clock, cm, prober: probes } = input;
  return createPodSync({
    runtime,
    statusManager: input.statusManager,
    clock,
    logger: input.logger,
    rootDir: input.config.rootDir,
    hostIP: () => input.hostIP,
    // As PLEG stores a status it is given (PLEG.updateCache).
    updateCache: (uid, status) =>
      void cache.set(uid, status, status.timestamp || clock.monotonic()),
    isDesired: (uid) => input.pods.has(uid),
    cachedStatus: (uid) => cache.get(uid),
    hasActions: (pod, status, opts) => planSteps(computePodActions(pod, status, opts)).length > 0,
    prepareInTurn: runtime.prepareInTurn,
    volumes: input.volumes,
    devices: input.devices,
    event: (pod, type, reason, message) => input.recorder.event(podRef(pod), type, reason, message),
    podCgroups: {
      ensure: (pod) => cm.ensurePodCgroup(pod),
      remove: (uid) => cm.removePodCgroup(uid),
    },
    livenessFailed: (uid) => probes.failed("liveness", uid),
    startupFailed: (uid) => probes.failed("startup", uid),
    readiness: probes.readiness,
    startup: probes.startup,
  });
}
