// The agent's garbage collectors, configured from the agent config: container GC, image GC and
// log rotation, each with its own loop. Node events go to the agent's recorder.

import { join } from "node:path";
import type { CriRuntime } from "../../cri/index.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import type { AgentConfig } from "../config/index.ts";
import type { EventRecorder } from "../events/index.ts";
import type { StateWrites } from "../events/state-writes.ts";
import { createImageGC, type ImageGC, type ImagesFreed } from "../images/index.ts";
import type { RuntimeManager } from "../kuberuntime/index.ts";
import { type ContainerGC, type ContainersFreed, createContainerGC } from "./container-gc.ts";
import type { PodGCState } from "./container-plan.ts";
import { createLogRotation, type LogRotation } from "./log-rotation.ts";

export interface AgentGCInput {
  config: AgentConfig;
  cri: CriRuntime;
  clock: Clock;
  logger: Logger;
  runtime: Pick<RuntimeManager, "removeContainer" | "stopContainer" | "removeSandbox">;
  recorder: Pick<EventRecorder, "event">;
  /** Whether every pod source was seen once. */
  sourcesReady(): boolean;
  podState(uid: string): PodGCState;
  stateWrites?: StateWrites;
  /** Images the image GC never removes (imported from archives still in the folder). */
  pinnedImages?: () => Iterable<string>;
}

/** The disk reclaim steps the eviction manager takes before it evicts pods, in the kubelet's
 * order; each resolves to what it freed. */
interface DiskReclaim {
  /** Every dead container and the sandboxes left empty (ContainerGC.deleteAllUnusedContainers). */
  deleteAllUnusedContainers(): Promise<ContainersFreed>;
  /** Every unused image past the minimum age (ImageGC.deleteUnusedImages). */
  deleteUnusedImages(): Promise<ImagesFreed>;
}

export interface AgentGC {
  containers: ContainerGC;
  images: ImageGC;
  logs: LogRotation;
  reclaim: DiskReclaim;
  run(signal: AbortSignal): Promise<void>;
}

/** A Warning event about the node. */
type NodeEvent = (reason: string, message: string) => void;

export function createAgentGC(input: AgentGCInput): AgentGC {
  const { config } = input;
  const nodeEvent: NodeEvent = (reason, message) =>
    input.recorder.event(
      { kind: "Node", namespace: "", name: config.nodeName, uid: config.nodeName },
      "Warning",
      reason,
      message,
    );
  const containers = agentContainerGC(input, nodeEvent);
  const images = agentImageGC(input, nodeEvent);
  const logs = agentLogRotation(input);
  return {
    containers,
    images,
    logs,
    reclaim: {
      deleteAllUnusedContainers: () => containers.deleteAllUnusedContainers(),
      deleteUnusedImages: () => images.deleteUnusedImages(),
    },
    async run(signal) {
      await Promise.all([containers.run(signal), images.run(signal), logs.run(signal)]);
    },
  };
}

function agentContainerGC(input: AgentGCInput, nodeEvent: NodeEvent): ContainerGC {
  const { config } = input;
  return createContainerGC({
    cri: input.cri,
    clock: input.clock,
    logger: input.logger.with({ component: "container-gc" }),
    nodeName: config.nodeName,
    policy: {
      minAgeMs: config.minimumContainerTTLDuration,
      maxPerPodContainer: config.maximumDeadContainersPerContainer,
      maxContainers: config.maximumDeadContainers,
    },
    periodMs: config.containerGCPeriod,
    createdGraceMs: config.runtimeRequestTimeout,
    sourcesReady: input.sourcesReady,
    podState: input.podState,
    removeContainer: (id) => input.runtime.removeContainer(id),
    stopContainer: (id, name) =>
      input.runtime.stopContainer(id, name, "Container is in unknown state, try killing it"),
    removeSandbox: (id) => input.runtime.removeSandbox(id),
    nodeEvent,
  });
}

function agentImageGC(input: AgentGCInput, nodeEvent: NodeEvent): ImageGC {
  const { config } = input;
  return createImageGC({
    cri: input.cri,
    clock: input.clock,
    logger: input.logger.with({ component: "image-gc" }),
    policy: {
      highThresholdPercent: config.imageGCHighThresholdPercent,
      lowThresholdPercent: config.imageGCLowThresholdPercent,
      minAgeMs: config.imageMinimumGCAge,
      maxAgeMs: config.imageMaximumGCAge,
    },
    periodMs: config.imageGCPeriod,
    maxImagesInStatus: config.nodeStatusMaxImages,
    recordsPath: join(config.rootDir, "state", "image-gc.json"),
    nodeEvent,
    ...(input.stateWrites !== undefined && { stateWrites: input.stateWrites }),
    ...(input.pinnedImages !== undefined && { pinnedImages: input.pinnedImages }),
  });
}

function agentLogRotation(input: AgentGCInput): LogRotation {
  const { config } = input;
  return createLogRotation({
    cri: input.cri,
    clock: input.clock,
    logger: input.logger.with({ component: "log-rotation" }),
    nodeName: config.nodeName,
    policy: { maxSizeBytes: config.containerLogMaxSize, maxFiles: config.containerLogMaxFiles },
    monitorIntervalMs: config.containerLogMonitorInterval,
  });
}

/** A pod's state as the container GC sees it, from its worker and whether a source wants it. */
export function podGCState(
  workers: {
    isEvicted(uid: string): boolean;
    state(uid: string): string | undefined;
    couldHaveRunningContainers(uid: string): boolean;
  },
  pods: { has(uid: string): boolean },
): (uid: string) => PodGCState {
  return (uid) => {
    // An evicted pod's content goes although its manifest is still there (the kubelet's
    // ShouldPodContentBeRemoved): its dead containers are collected as a gone pod's.
    if (workers.isEvicted(uid) && workers.state(uid) === "terminated") return "gone";
    if (pods.has(uid)) return workers.state(uid) === "terminated" ? "finished" : "active";
    return workers.couldHaveRunningContainers(uid) ? "active" : "gone";
  };
}
