// The status manager: kubelet's pod status rules as pure functions, kubectl's STATUS column
// (its rules are src/api's, beside the other columns), and the store of the latest status of
// each pod.

export { type DisplayOptions, type PodDisplay, podDisplayStatus } from "../../api/pod-display.ts";
export {
  containersReadyCondition,
  initializedCondition,
  KUBELET_CONDITIONS,
  keepTransitionTimes,
  readyToStartContainers,
} from "./conditions.ts";
export { convertContainerStatuses, RUNTIME_SCHEME, shouldRestart } from "./containers.ts";
export { type GeneratePodStatusInput, generatePodStatus } from "./generate.ts";
export {
  createStatusManager,
  type StatusChange,
  type StatusListener,
  type StatusManager,
  type StatusManagerDeps,
} from "./manager.ts";
export { getPodPhase, type PhaseOptions } from "./phase.ts";
export { applyProbeResults, type ProbeResults } from "./probes.ts";
export {
  ContainerCreating,
  ContainerStatusUnknown,
  CrashLoopBackOff,
  crashLoopMessage,
  formatGoDuration,
  PodInitializing,
  type SyncError,
  toRFC3339,
} from "./reasons.ts";
