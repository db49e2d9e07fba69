// The agent's volume manager: pod folders under the root dir, volumes made of the sources'
// ConfigMaps and Secrets, tmpfs sized from the node's allocatable, and events through the
// agent's recorder.
import type { NodeAllocatable } from "../../api/index.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { type EventRecorder, podRef } from "../events/index.ts";
import type { ObjectLookup } from "../sources/index.ts";
import { createSystemMounter, createVolumeManager, type VolumeManager } from "./index.ts";

export interface AgentVolumesInput {
  config: { rootDir: string; nodeName: string };
  objects: ObjectLookup;
  allocatable: () => NodeAllocatable;
  clock: Clock;
  logger: Logger;
  recorder: Pick<EventRecorder, "event">;
}

export function setupVolumeManager(input: AgentVolumesInput): VolumeManager {
  const { recorder } = input;
  return createVolumeManager({
    rootDir: input.config.rootDir,
    nodeName: input.config.nodeName,
    objects: input.objects,
    allocatable: input.allocatable,
    clock: input.clock,
    logger: input.logger.with({ component: "volumes" }),
    recorder: (pod, type, reason, message) => recorder.event(podRef(pod), type, reason, message),
    mounter: createSystemMounter(),
  });
}
