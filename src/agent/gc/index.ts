// Garbage collection of dead containers and sandboxes (container GC) and container log rotation.
// Image GC lives beside the image manager (src/agent/images/gc.ts). The eviction manager reclaims
// disk through ContainerGC.deleteAllUnusedContainers() and ImageGC.deleteUnusedImages().

export { createContainerGC } from "./container-gc.ts";
export {
  type ContainerGCInput,
  type GCContainer,
  type GCSandbox,
  type PodGCState,
  planContainerGC,
} from "./container-plan.ts";
export { createLogRotation, planRotation } from "./log-rotation.ts";
export { createAgentGC } from "./setup.ts";
