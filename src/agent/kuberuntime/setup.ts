// The runtime manager as the agent configures it: CRI, events, timings from the agent config.
import { availableParallelism, totalmem } from "node:os";
import type { NodeAllocatable } from "../../api/index.ts";
import { type ContainerdClient, createContainerdClient } from "../../cri/containerd.ts";
import { type CriClient, type CriRuntime, createCriClient } from "../../cri/index.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import type { ContainerManager } from "../cm/index.ts";
import type { AgentConfig } from "../config/index.ts";
import type { EventRecorder } from "../events/index.ts";
import { podRef } from "../events/index.ts";
import { createPullLeases } from "../images/index.ts";
import type { RunningPod } from "../kubecontainer/types.ts";
import { createListingCache, type ListingCache } from "../pleg/index.ts";
import type { RuntimeManagerDeps } from "./core.ts";
import {
  type ContainerVolumes,
  createRuntimeManager,
  type EnvObjects,
  listRunningPods,
  type RuntimeManager,
} from "./index.ts";

export interface AgentRuntimeDeps {
  cri: CriRuntime;
  clock: Clock;
  logger: Logger;
  recorder: EventRecorder;
  config: AgentConfig;
  hostIP: string;
  /** The pod cgroup and CPU manager cpuset (the container manager); absent: none. */
  cm?: Pick<ContainerManager, "podCgroupParent" | "cpusetFor">;
  /** The pod's volumes as containers mount them (the volume manager). */
  volumes: ContainerVolumes;
  /** ConfigMaps and Secrets for env and imagePullSecrets (the object store). */
  objects: EnvObjects;
  /** The node's allocatable, for resourceFieldRef of a container with no limit. */
  allocatable: () => NodeAllocatable;
  /** What a container's devices add to its config (the device manager); absent: none. */
  devices?: RuntimeManagerDeps["devices"];
  /** The runtime's own API beside CRI (containerd's), whose ingests show how far a pull has
   * got; absent: pulls are not watched. */
  containerd?: ContainerdClient;
}

/** How often a running pull's ingests are listed. */
const PULL_PROGRESS_INTERVAL_MS = 1000;
/** Deadline of one listing of the ingests. */
const LIST_INGESTS_TIMEOUT_MS = 5000;

/** A running pull's figures and stall deadline, from containerd's ingests. */
function pullProgress(containerd: ContainerdClient, deadlineMs: number) {
  return {
    listIngests: (signal: AbortSignal) =>
      containerd.content.listStatuses([], { signal, timeoutMs: LIST_INGESTS_TIMEOUT_MS }),
    intervalMs: PULL_PROGRESS_INTERVAL_MS,
    deadlineMs,
  };
}

export function createAgentRuntime(deps: AgentRuntimeDeps): RuntimeManager {
  const { config } = deps;
  return createRuntimeManager({
    cri: deps.cri,
    volumes: deps.volumes,
    objects: deps.objects,
    allocatable: deps.allocatable,
    ...(deps.devices && { devices: deps.devices }),
    clock: deps.clock,
    logger: deps.logger.with({ component: "runtime" }),
    recorder: (pod, type, reason, message, fieldPath) => {
      const ref = podRef(pod);
      if (fieldPath !== undefined) ref.fieldPath = fieldPath;
      deps.recorder.event(ref, type, reason, message);
    },
    podLogsDir: config.podLogsDir,
    rootDir: config.rootDir,
    nodeName: config.nodeName,
    nodeIP: () => deps.hostIP,
    nodeMemoryBytes: totalmem(),
    ...(deps.cm && { podCgroupParent: deps.cm.podCgroupParent, cpusetFor: deps.cm.cpusetFor }),
    crashLoopBackOff: { initialMs: config.crashLoopBackOffBase, maxMs: config.crashLoopBackOffMax },
    imagePullBackOff: { initialMs: config.imagePullBackOffBase, maxMs: config.imagePullBackOffMax },
    ...(config.imagePullCredentialsFile ? { credentials: config.imagePullCredentialsFile } : {}),
    imagePulls: {
      serializeImagePulls: config.serializeImagePulls,
      ...(config.maxParallelImagePulls !== undefined && {
        maxParallelImagePulls: config.maxParallelImagePulls,
      }),
      registryPullQPS: config.registryPullQPS,
      registryBurst: config.registryBurst,
    },
    ...(deps.containerd && {
      pullProgress: pullProgress(deps.containerd, config.imagePullProgressDeadline),
      pullLeases: createPullLeases({
        runtime: deps.containerd,
        pullImage: (request, opts) => deps.cri.pullImage(request, opts),
        clock: deps.clock,
        logger: deps.logger.with({ component: "images" }),
      }),
    }),
    runtimeRequestTimeoutMs: config.runtimeRequestTimeout,
    // Start calls at once: the number of CPUs (at least 2) unless set.
    maxParallelStarts: config.maxParallelStarts ?? Math.max(2, availableParallelism()),
  });
}

/** The CRI client of the agent's runtime endpoint; at logLevel debug every CRI call and its
 * duration is logged (where a slow device spends its time). */
export function connectRuntime(
  settings: Pick<AgentConfig, "containerRuntimeEndpoint" | "runtimeRequestTimeout" | "logLevel">,
  logger: Logger,
): CriClient {
  const criLog = logger.with({ component: "cri" });
  return createCriClient({
    endpoint: settings.containerRuntimeEndpoint,
    lifecycleTimeoutMs: settings.runtimeRequestTimeout,
    ...(settings.logLevel === "debug" && {
      onCall: (method, ms, error) =>
        criLog.debug("CRI call", {
          method,
          ms: Math.round(ms * 10) / 10,
          ...(error && { error: error.message }),
        }),
    }),
  });
}

/** containerd's own API on the CRI endpoint (the same socket). */
export function connectContainerd(settings: Pick<AgentConfig, "containerRuntimeEndpoint">) {
  return createContainerdClient({ endpoint: settings.containerRuntimeEndpoint });
}

/** The runtime's pods of this node (the runtime manager's getPods), kept for readers that may
 * take a listing up to two relist periods old. */
export function createRuntimeListing(
  cri: CriRuntime,
  settings: { nodeName: string; plegRelistPeriod: number },
  clock: Clock,
): ListingCache<RunningPod> {
  return createListingCache(
    () => listRunningPods(cri, undefined, settings.nodeName),
    clock,
    settings.plegRelistPeriod * 2,
  );
}
