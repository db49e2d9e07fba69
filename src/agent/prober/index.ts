// The prober: liveness, readiness and startup probes with kubelet's semantics. A manager keeps
// one worker per (pod, container, probe kind), driven by published statuses; settled results go
// to a results manager that the pod sync reads.

export { createProbeHandler, type HandlerDeps, MAX_EXEC_OUTPUT } from "./handlers.ts";
export { createProberManager, type ProberManager, type ProberManagerDeps } from "./manager.ts";
export { cutOutput, EVENT_OUTPUT_MAX, type ProberDeps, runProbe } from "./prober.ts";
export { createResultsManager, type ResultChange, type ResultsManager } from "./results.ts";
export type { ProbeStats } from "./stats.ts";
export * from "./types.ts";
export { ProbeWorker, type WorkerDeps, type WorkerSpec } from "./worker.ts";
