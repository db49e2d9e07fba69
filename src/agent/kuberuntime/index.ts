// The runtime manager: turns a pod spec and the runtime's view of it into CRI calls (plan, then
// act), and rebuilds the runtime's view of pods from CRI alone.

export {
  containerLogPath,
  generateContainerConfig,
  restartCountFromLogDir,
} from "./container-config.ts";
export type { BackoffSettings, RuntimeManagerDeps, SyncError, WaitingReason } from "./core.ts";
export { CrashLoopBackoff } from "./crashloop.ts";
export {
  ContainerConfigError,
  type EnvContext,
  type EnvObjects,
  expand,
  expandCommandAndArgs,
  fieldRefValue,
  makeEnvironment,
} from "./env.ts";
export {
  createRuntimeManager,
  type RuntimeManager,
  type SyncPodOptions,
  type SyncPodResult,
} from "./executor.ts";
export { formatPod, goDuration } from "./format.ts";
export { hashContainer } from "./hash.ts";
export { hookURL, resolvePort, runHook } from "./hooks.ts";
export { MIN_GRACE_PERIOD_SECONDS, runningPodOf } from "./kill.ts";
export * from "./labels.ts";
export type { ContainerVolumes } from "./mounts.ts";
export {
  type ContainerToKill,
  computePodActions,
  type KillReason,
  type PlanContext,
  type PodActions,
  sandboxChanged,
  shouldRestart,
} from "./plan.ts";
export { containerResources, milliCPUToQuota, milliCPUToShares, oomScoreAdj } from "./resources.ts";
export {
  generateSandboxConfig,
  parseResolvConf,
  podDNSConfig,
  podHostname,
  podLogDirectory,
  portMappings,
} from "./sandbox-config.ts";
export {
  containerSecurityContext,
  namespaceOptions,
  normalizeCapability,
  sandboxSecurityContext,
} from "./security.ts";
export { crashLoopKey } from "./start.ts";
export {
  criLogMessages,
  listRunningPods,
  readPodStatus,
  toContainerState,
  toContainerStatus,
  toSandboxStatus,
} from "./status.ts";
export { planSteps, type SyncStep, type SyncStepKind } from "./steps.ts";
