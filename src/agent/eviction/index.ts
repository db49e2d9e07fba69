// The eviction manager (the kubelet's pkg/kubelet/eviction): node pressure signals measured on
// the host, thresholds with the kubelet's semantics, pressure conditions, admission under
// pressure, ranking and evicting pods one at a time, per-pod local storage limits, and when an
// evicted static pod may run again.

export {
  CONFIG_SIGNALS,
  type Observation,
  type PressureCondition,
  type Resource,
  type Signal,
} from "../evictionapi/signals.ts";
export { buildThresholds, type Threshold } from "../evictionapi/thresholds.ts";
export { admitUnderPressure, MEMORY_PRESSURE_TAINT, tolerates } from "./admission.ts";
export { createPodEvictor } from "./evict-pod.ts";
export {
  createEvictionManager,
  type EvictionManager,
  type EvictionManagerDeps,
  type EvictRequest,
  IMMEDIATE_GRACE_SECONDS,
  POD_CLEANUP_TIMEOUT_MS,
} from "./manager.ts";
export { EVICTED_REASON, evictionMessage, goQuantity } from "./message.ts";
export { type CyclePlan, type EvictionState, INITIAL_STATE, planCycle } from "./plan.ts";
export {
  createPsiReader,
  formatPsi,
  type NodePsi,
  PSI_RESOURCES,
  type PsiResource,
  parsePsi,
} from "./psi.ts";
export { isCriticalPod, podPriority, rankPods, SYSTEM_CRITICAL_PRIORITY } from "./rank.ts";
export { type AgentEvictionInput, createAgentEviction, type EvictionSettings } from "./setup.ts";
export type { PodUsage } from "./usage.ts";
