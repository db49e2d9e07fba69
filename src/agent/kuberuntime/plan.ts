// computePodActions: what the runtime must do to bring a pod from what the runtime reports to what
// its spec asks, with kubelet's rules. Pure: everything it needs is passed in; it calls nothing.
//
// Rules (kubelet's computePodActions):
// - No sandbox, or none ready, or more than one ready, or the newest one's network mode differs
//   from the spec, or a pod-network sandbox has no IP: kill everything and create a new sandbox
//   (attempt = newest attempt + 1), then start from the first init container. A restartPolicy
//   Never pod that already ran containers gets no new sandbox, only the kill.
// - Init containers run one at a time, in order; the next starts when the one before exited 0.
//   A failed init container fails the pod under restartPolicy Never, else it is restarted.
//   Sidecars (init containers with restartPolicy Always) count as done while running and are
//   restarted whenever they are not.
// - App containers start once initialization is done; exited ones restart by restartPolicy
//   (Always; OnFailure when the exit code is not 0; Never not at all). A running container whose
//   spec hash changed, or that failed its liveness or startup probe, is killed (and restarted,
//   for a spec change whatever the policy). Containers in an unknown state are killed first.
// - When nothing runs and nothing is to start, the pod is killed (its sandbox stopped).

import type { Container, Pod } from "../../api/types.ts";
import type { ContainerStatus, PodStatus } from "../kubecontainer/types.ts";
import { hashContainer } from "./hash.ts";

/** Why a container is killed (kubelet's containerKillReason); "" for a spec change. */
export type KillReason = "" | "LivenessProbe" | "StartupProbe" | "Unknown" | "FailedPostStartHook";

interface ContainerToKill {
  name: string;
  reason: KillReason;
  /** e.g. "Container web definition changed, will be restarted". */
  message: string;
}

export interface PodActions {
  /** Stop every container and sandbox of the pod first. */
  killPod: boolean;
  createSandbox: boolean;
  /** The newest sandbox's id ("" when there is none). */
  sandboxId: string;
  /** metadata.attempt of the sandbox to create (or of the current one). */
  attempt: number;
  /** Index in spec.initContainers of the regular init container to start next, if any. */
  nextInitContainerToStart: number | undefined;
  /** Indexes in spec.initContainers to start, in order: restarting sidecars, then the next. */
  initContainersToStart: number[];
  /** Indexes in spec.containers to start. */
  containersToStart: number[];
  /** Containers to kill (when killPod is false), by CRI container id. */
  containersToKill: Map<string, ContainerToKill>;
}

export interface PlanContext {
  /** Ids of containers the prober found failing their liveness probe. */
  livenessFailed?: ReadonlySet<string>;
  /** Ids of containers the prober found failing their startup probe. */
  startupFailed?: ReadonlySet<string>;
}

const isSidecar = (c: Container): boolean => c.restartPolicy === "Always";

function newest(status: PodStatus | undefined, name: string): ContainerStatus | undefined {
  let best: ContainerStatus | undefined;
  for (const c of status?.containers ?? []) {
    if (c.name === name && (best === undefined || c.createdAt > best.createdAt)) best = c;
  }
  return best;
}

const restartsOnFailure = (pod: Pod): boolean => pod.spec.restartPolicy !== "Never";

function succeeded(s: ContainerStatus | undefined): boolean {
  return s?.state === "exited" && s.exitCode === 0;
}

function initFailed(s: ContainerStatus): boolean {
  if (s.reason.includes("OOMKilled")) return true;
  return (s.state === "exited" && s.exitCode !== 0) || s.state === "unknown";
}

/** kubelet's ShouldContainerBeRestarted, for a container that is not running. */
function shouldRestart(c: Container, pod: Pod, status: PodStatus | undefined): boolean {
  if (pod.metadata.deletionTimestamp) return false;
  const s = newest(status, c.name);
  if (s === undefined) return true;
  if (s.state === "running") return false;
  if (s.state === "unknown" || s.state === "created") return true;
  if (pod.spec.restartPolicy === "Never") return false;
  if (pod.spec.restartPolicy === "OnFailure" && s.exitCode === 0) return false;
  return true;
}

interface SandboxDecision {
  create: boolean;
  attempt: number;
  sandboxId: string;
}

/** kubelet's PodSandboxChanged. */
function sandboxChanged(pod: Pod, status: PodStatus | undefined): SandboxDecision {
  const sandboxes = status?.sandboxes ?? [];
  const latest = sandboxes[0];
  if (latest === undefined) return { create: true, attempt: 0, sandboxId: "" };
  const next = { create: true, attempt: latest.attempt + 1, sandboxId: latest.id };
  const ready = sandboxes.filter((s) => s.state === "ready").length;
  if (ready > 1 || latest.state !== "ready") return next;
  const hostNetwork = pod.spec.hostNetwork === true;
  if (latest.hostNetwork !== hostNetwork) return { ...next, sandboxId: "" };
  if (!hostNetwork && latest.ips.length === 0) return next;
  return { create: false, attempt: latest.attempt, sandboxId: latest.id };
}

function emptyActions(d: SandboxDecision): PodActions {
  return {
    killPod: d.create,
    createSandbox: d.create,
    sandboxId: d.sandboxId,
    attempt: d.attempt,
    nextInitContainerToStart: undefined,
    initContainersToStart: [],
    containersToStart: [],
    containersToKill: new Map(),
  };
}

function anyAppContainerCreated(pod: Pod, status: PodStatus | undefined): boolean {
  return pod.spec.containers.some((c) => {
    const s = newest(status, c.name)?.state;
    return s === "created" || s === "running" || s === "unknown";
  });
}

/** The actions when a new sandbox is needed: kill all, then start from the beginning. */
function planNewSandbox(pod: Pod, status: PodStatus | undefined, a: PodActions): PodActions {
  if (!restartsOnFailure(pod) && a.attempt !== 0 && (status?.containers.length ?? 0) > 0) {
    return { ...a, createSandbox: false };
  }
  const toStart = pod.spec.containers.flatMap((c, i) =>
    pod.spec.restartPolicy === "OnFailure" && succeeded(newest(status, c.name)) ? [] : [i],
  );
  if (toStart.length === 0 && initializationDone(pod, status)) {
    return { ...a, createSandbox: false };
  }
  if ((pod.spec.initContainers?.length ?? 0) > 0) {
    const first = pod.spec.initContainers?.[0];
    const next = first && !isSidecar(first) ? 0 : undefined;
    return { ...a, nextInitContainerToStart: next, initContainersToStart: [0] };
  }
  return { ...a, containersToStart: toStart };
}

function initializationDone(pod: Pod, status: PodStatus | undefined): boolean {
  if (anyAppContainerCreated(pod, status)) return true;
  return (pod.spec.initContainers ?? []).every((c) =>
    isSidecar(c) ? newest(status, c.name) !== undefined : succeeded(newest(status, c.name)),
  );
}

function killUnknown(a: PodActions, s: ContainerStatus | undefined, what: string): void {
  if (s?.state !== "unknown") return;
  a.containersToKill.set(s.id, {
    name: s.name,
    reason: "Unknown",
    message: `${what} is in "unknown" state, try killing it before restart`,
  });
}

/** Adds the init containers to start (or the pod kill); returns whether initialization is done. */
function planInit(pod: Pod, status: PodStatus | undefined, a: PodActions): boolean {
  const inits = pod.spec.initContainers ?? [];
  if (anyAppContainerCreated(pod, status)) {
    inits.forEach((c, i) => {
      const s = newest(status, c.name);
      if (!isSidecar(c) || s?.state === "running" || pod.metadata.deletionTimestamp) return;
      killUnknown(a, s, "Init container");
      a.initContainersToStart.push(i);
    });
    return true;
  }
  for (const [i, c] of inits.entries()) {
    const s = newest(status, c.name);
    if (isSidecar(c)) {
      if (s?.state === "running") continue;
      killUnknown(a, s, "Init container");
      a.initContainersToStart.push(i);
      return false;
    }
    if (s === undefined || s.state === "created") {
      a.nextInitContainerToStart = i;
      a.initContainersToStart.push(i);
      return false;
    }
    if (s.state === "running") return false;
    if (initFailed(s)) {
      if (!restartsOnFailure(pod)) {
        a.killPod = true;
        return false;
      }
      killUnknown(a, s, "Init container");
      a.nextInitContainerToStart = i;
      a.initContainersToStart.push(i);
      return false;
    }
  }
  return true;
}

/** Plans one app container; returns true when a running instance is kept. */
function planAppContainer(
  pod: Pod,
  status: PodStatus | undefined,
  index: number,
  ctx: PlanContext,
  a: PodActions,
): boolean {
  const c = pod.spec.containers[index] as Container;
  const s = newest(status, c.name);
  if (s === undefined || s.state !== "running") {
    if (shouldRestart(c, pod, status)) {
      a.containersToStart.push(index);
      killUnknown(a, s, "Container");
    }
    return false;
  }
  let message: string;
  let reason: KillReason = "";
  let restart = restartsOnFailure(pod);
  if (s.hash !== hashContainer(c)) {
    message = `Container ${c.name} definition changed`;
    restart = true;
  } else if (ctx.livenessFailed?.has(s.id)) {
    message = `Container ${c.name} failed liveness probe`;
    reason = "LivenessProbe";
  } else if (ctx.startupFailed?.has(s.id)) {
    message = `Container ${c.name} failed startup probe`;
    reason = "StartupProbe";
  } else {
    return true;
  }
  if (restart) {
    message = `${message}, will be restarted`;
    a.containersToStart.push(index);
  }
  a.containersToKill.set(s.id, { name: c.name, reason, message });
  return false;
}

/** The actions that bring the pod from `status` (undefined: nothing in the runtime) to its spec. */
export function computePodActions(
  pod: Pod,
  status: PodStatus | undefined,
  ctx: PlanContext = {},
): PodActions {
  const decision = sandboxChanged(pod, status);
  const a = emptyActions(decision);
  if (decision.create) return planNewSandbox(pod, status, a);
  const initialized = planInit(pod, status, a);
  if (a.killPod || !initialized) return a;
  let keep = 0;
  for (const index of pod.spec.containers.keys()) {
    if (planAppContainer(pod, status, index, ctx, a)) keep++;
  }
  if (keep === 0 && a.containersToStart.length === 0) {
    a.killPod = true;
    a.initContainersToStart = [];
  }
  return a;
}
