// The container manager (kubelet's cm): cgroup drivers for v1 and v2, the kubepods/QoS/pod
// hierarchy, node allocatable and resource admission, and the CPU manager.

export { checkResourceFit } from "./admission.ts";
export {
  computeAllocatable,
  parseReservation,
  podsCgroupLimits,
  thresholdBytes,
  toResourceList,
} from "./allocatable.ts";
export type { CgroupManager, ResourceConfig } from "./cgroup.ts";
export { createCgroupV1 } from "./cgroup-v1.ts";
export { createCgroupV2 } from "./cgroup-v2.ts";
export { type ContainerManager, createContainerManager } from "./container-manager.ts";
export * from "./convert.ts";
export { decodeCheckpoint, encodeCheckpoint } from "./cpu-checkpoint.ts";
export { createCpuManager } from "./cpu-manager.ts";
export * from "./cpu-reconcile.ts";
export * from "./cpu-static.ts";
export type { CpuTopology } from "./cpu-topology.ts";
export * from "./cpuset.ts";
export { type CgroupLayout, detectCgroupLayout } from "./mountinfo.ts";
export * from "./pod-resources.ts";
export { detectCgroups, podsRootName, setupContainerManager } from "./setup.ts";
export { literalCgroupName } from "./systemd-names.ts";
