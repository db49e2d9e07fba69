// Pod admission handlers (the kubelet's lifecycle package): the checks a new pod must pass before
// it runs, as one list in the kubelet's order. The sync loop runs them around its own pod count
// (syncloop/admission.ts): node pressure (the eviction manager's) and the sysctls first, then
// the pod count, then the hub's device policy, the devices (the device manager's) and the
// resources (the container manager's). A manager that admits pods adds its handler here.
import { readFileSync } from "node:fs";
import type { Pod } from "../../api/types.ts";
import type { Logger } from "../../util/log.ts";
import type { HubPodPolicy } from "../config/index.ts";
import { createPolicyAdmission } from "../policy/index.ts";
import { createSysctlAdmission, KERNEL_RELEASE_FILE } from "../sysctl/index.ts";

export interface AdmitFailure {
  reason: string;
  message: string;
}

/** An admit handler: why `pod` may not run next to the `active` pods, or undefined. */
type AdmitHandler = (pod: Pod, active: readonly Pod[]) => AdmitFailure | undefined;

/** The handlers the sync loop runs before and after its pod count. */
export interface AdmitHandlers {
  beforeCount: AdmitHandler[];
  afterCount: AdmitHandler[];
}

export interface AdmitHandlersDeps {
  config: { hubPodPolicy: HubPodPolicy; allowedUnsafeSysctls: string[] };
  logger: Logger;
  /** Admission under node pressure (the eviction manager). */
  eviction: { admit(pod: Pod): AdmitFailure | undefined };
  /** Whether some container of the pod already runs (admitted before the agent restarted). */
  runsAlready(pod: Pod): boolean;
  /** The resource fit and CPU assignment (the container manager). */
  resources: { admit(pod: Pod, active: readonly Pod[]): AdmitFailure | undefined };
  /** Devices (the device manager); absent: extended resources are not looked at. */
  devices?: { admit(pod: Pod, active: readonly Pod[]): AdmitFailure | undefined };
}

export function createAdmitHandlers(deps: AdmitHandlersDeps): AdmitHandlers {
  const policy = createPolicyAdmission(deps.config.hubPodPolicy);
  const sysctls = createSysctlAdmission({
    allowedUnsafeSysctls: deps.config.allowedUnsafeSysctls,
    kernelRelease: () => readFileSync(KERNEL_RELEASE_FILE, "utf8"),
    log: deps.logger.with({ component: "sysctl" }),
  });
  return {
    // Node pressure keeps new pods out, but does not stop a pod whose containers already run
    // (admitted before the agent restarted): the eviction manager ranks it with the others.
    // Then the sysctls, which the runtime would set in the pod's namespaces.
    beforeCount: [
      (pod) => (deps.runsAlready(pod) ? undefined : deps.eviction.admit(pod)),
      (pod) => sysctls.admit(pod),
    ],
    // Hub pods must keep to the device's policy before they may take resources; devices are
    // counted before the resource fit, as the kubelet's allocating handler runs before it.
    afterCount: [
      (pod, active) => policy.admit(pod, active),
      // A pod that runs already holds its devices (or lost them with a checkpoint): it is never
      // stopped for them at an agent restart.
      (pod, active) => (deps.runsAlready(pod) ? undefined : deps.devices?.admit(pod, active)),
      (pod, active) => deps.resources.admit(pod, active),
    ],
  };
}
