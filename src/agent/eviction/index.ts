// The eviction manager (the kubelet's pkg/kubelet/eviction): node pressure signals measured on
// the host, thresholds with the kubelet's semantics, pressure conditions, admission under
// pressure, ranking and evicting pods one at a time, per-pod local storage limits, and when an
// evicted static pod may run again.

export { createAgentEviction } from "./setup.ts";
