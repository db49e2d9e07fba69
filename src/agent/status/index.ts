// The status manager: kubelet's pod status rules as pure functions, kubectl's STATUS column
// (its rules are src/api's, beside the other columns), and the store of the latest status of
// each pod.

export { type PodDisplay, podDisplayStatus } from "../../api/pod-display.ts";
export { type GeneratePodStatusInput, generatePodStatus } from "./generate.ts";
export { createStatusManager, type StatusChange, type StatusManager } from "./manager.ts";
export type { ProbeResults } from "./probes.ts";
export { crashLoopMessage, type SyncError, toRFC3339 } from "./reasons.ts";
