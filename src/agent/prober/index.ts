// The prober: liveness, readiness and startup probes with kubelet's semantics. A manager keeps
// one worker per (pod, container, probe kind), driven by published statuses; settled results go
// to a results manager that the pod sync reads.

export { createProbeHandler } from "./handlers.ts";
export { createProberManager } from "./manager.ts";
export { EVENT_OUTPUT_MAX } from "./prober.ts";
export type { ResultChange } from "./results.ts";
export * from "./types.ts";
