// Garbage collection of dead containers and sandboxes (container GC) and container log rotation.
// Image GC lives beside the image manager (src/agent/images/gc.ts). The eviction manager reclaims
// disk through ContainerGC.deleteAllUnusedContainers() and ImageGC.deleteUnusedImages().

export {
  type ContainerGC,
  type ContainerGCDeps,
  type ContainersFreed,
  createContainerGC,
} from "./container-gc.ts";
export {
  type ContainerGCAction,
  type ContainerGCInput,
  type ContainerGCPolicy,
  type GCContainer,
  type GCSandbox,
  type PodGCState,
  planContainerGC,
} from "./container-plan.ts";
export {
  createLogRotation,
  type LogRotation,
  type LogRotationDeps,
  type LogRotationPolicy,
  planRotation,
  type RotationPlan,
} from "./log-rotation.ts";
export { type AgentGC, type AgentGCInput, createAgentGC, type DiskReclaim } from "./setup.ts";
