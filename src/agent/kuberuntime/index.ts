// The runtime manager: turns a pod spec and the runtime's view of it into CRI calls (plan, then
// act), and rebuilds the runtime's view of pods from CRI alone.

export type { RuntimeManagerDeps } from "./core.ts";
export { CrashLoopBackoff } from "./crashloop.ts";
export {
  ContainerConfigError,
  type EnvContext,
  type EnvObjects,
  expand,
  expandCommandAndArgs,
  makeEnvironment,
} from "./env.ts";
export { createRuntimeManager, type RuntimeManager } from "./executor.ts";
export { goDuration } from "./format.ts";
export { hashContainer } from "./hash.ts";
export { hookURL, resolvePort } from "./hooks.ts";
export * from "./labels.ts";
export type { ContainerVolumes } from "./mounts.ts";
export { computePodActions } from "./plan.ts";
export { containerResources, milliCPUToQuota, milliCPUToShares, oomScoreAdj } from "./resources.ts";
export { generateSandboxConfig, podDNSConfig } from "./sandbox-config.ts";
export { containerSecurityContext } from "./security.ts";
export { criLogMessages, listRunningPods, toContainerState } from "./status.ts";
export { planSteps } from "./steps.ts";
