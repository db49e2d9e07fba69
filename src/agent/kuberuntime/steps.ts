// The plan as an ordered list of steps, a tagged union. The executor's table (executor.ts) is
// typed over `SyncStep["kind"]`, so a new kind of step does not compile until it can be run.

import type { KillReason, PodActions } from "./plan.ts";

export type SyncStep =
  /** Stop every running container, then every sandbox, of the pod. */
  | { kind: "killPod"; createSandboxAfter: boolean }
  /** Stop one container (after its preStop hook). */
  | {
      kind: "killContainer";
      containerId: string;
      name: string;
      reason: KillReason;
      message: string;
    }
  /** Run a new sandbox; `previousSandboxId` is set when it replaces one. */
  | { kind: "createSandbox"; attempt: number; previousSandboxId: string }
  /** Create and start spec.initContainers[index] (a failure ends the sync: init is in order). */
  | { kind: "startInitContainer"; index: number }
  /** Create and start spec.containers[index] (a failure does not stop the others). */
  | { kind: "startContainer"; index: number };

export type SyncStepKind = SyncStep["kind"];

/** The steps that carry out `actions`, in kubelet's SyncPod order. */
export function planSteps(actions: PodActions): SyncStep[] {
  const steps: SyncStep[] = [];
  if (actions.killPod) {
    steps.push({ kind: "killPod", createSandboxAfter: actions.createSandbox });
  } else {
    for (const [containerId, info] of actions.containersToKill) {
      steps.push({ kind: "killContainer", containerId, ...info });
    }
  }
  if (actions.createSandbox) {
    steps.push({
      kind: "createSandbox",
      attempt: actions.attempt,
      previousSandboxId: actions.sandboxId,
    });
  }
  for (const index of actions.initContainersToStart)
    steps.push({ kind: "startInitContainer", index });
  for (const index of actions.containersToStart) steps.push({ kind: "startContainer", index });
  return steps;
}
