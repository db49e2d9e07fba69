// The pod phase from its container statuses, with kubelet's rules (getPhase), before the
// ContainerRestartRules feature: regular init containers must all succeed before the pod leaves
// Pending (a failure fails the pod only under restartPolicy Never); sidecars count with the app
// containers; once every app container has stopped the restart policy decides: Always stays
// Running, otherwise all-succeeded is Succeeded, Never with a failure is Failed and OnFailure
// with a failure stays Running (it restarts).

import { isSidecar } from "../../api/containers.ts";
import type { ContainerStatus, Pod, PodPhase } from "../../api/types.ts";

export interface PhaseOptions {
  /** The pod will not run again whatever its restart policy (kubelet's podIsTerminal). */
  terminal: boolean;
  /** An app container of the current sandbox has been created: sidecars restarting later do
   * not put the pod back to Pending. */
  initialized: boolean;
}

interface Counts {
  pendingInit: number;
  pendingSidecar: number;
  failedInit: number;
  unknown: number;
  running: number;
  waiting: number;
  stopped: number;
  succeeded: number;
}

export function getPodPhase(
  pod: Pod,
  init: ContainerStatus[],
  app: ContainerStatus[],
  opts: PhaseOptions,
): PodPhase {
  const n = countContainers(pod, init, app);
  const policy = pod.spec.restartPolicy ?? "Always";
  if (n.failedInit > 0 && policy === "Never") return "Failed";
  if (n.pendingInit > 0 || (n.pendingSidecar > 0 && !opts.initialized) || n.waiting > 0) {
    return "Pending";
  }
  if (n.running > 0 && n.unknown === 0) return "Running";
  if (n.running === 0 && n.stopped > 0 && n.unknown === 0) {
    if (opts.terminal) return n.stopped === n.succeeded ? "Succeeded" : "Failed";
    if (policy === "Always") return "Running";
    if (n.stopped === n.succeeded) return "Succeeded";
    if (policy === "Never") return "Failed";
    return "Running";
  }
  return "Pending";
}

function countContainers(pod: Pod, init: ContainerStatus[], app: ContainerStatus[]): Counts {
  const n: Counts = {
    pendingInit: 0,
    pendingSidecar: 0,
    failedInit: 0,
    unknown: 0,
    running: 0,
    waiting: 0,
    stopped: 0,
    succeeded: 0,
  };
  const initByName = new Map(init.map((s) => [s.name, s]));
  for (const c of pod.spec.initContainers ?? []) {
    const s = initByName.get(c.name);
    if (isSidecar(c)) countSidecar(n, s);
    else countRegularInit(n, s);
  }
  const appByName = new Map(app.map((s) => [s.name, s]));
  for (const c of pod.spec.containers) countApp(n, appByName.get(c.name));
  return n;
}

function countRegularInit(n: Counts, s: ContainerStatus | undefined): void {
  if (!s || s.state.running) {
    n.pendingInit++;
  } else if (s.state.terminated) {
    if (s.state.terminated.exitCode !== 0) n.failedInit++;
  } else if (s.state.waiting) {
    const last = s.lastState.terminated;
    if (!last) n.pendingInit++;
    else if (last.exitCode !== 0) n.failedInit++;
  } else {
    n.pendingInit++;
  }
}

function countSidecar(n: Counts, s: ContainerStatus | undefined): void {
  if (!s) {
    n.unknown++;
  } else if (s.state.running) {
    if (s.started !== true) n.pendingSidecar++;
    n.running++;
  } else if (s.state.terminated) {
    // A stopped sidecar does not count towards the phase.
  } else if (s.state.waiting) {
    if (!s.lastState.terminated) {
      n.pendingSidecar++;
      n.waiting++;
    }
  } else {
    n.pendingSidecar++;
    n.unknown++;
  }
}

function countApp(n: Counts, s: ContainerStatus | undefined): void {
  if (!s) {
    n.unknown++;
  } else if (s.state.running) {
    n.running++;
  } else if (s.state.terminated) {
    n.stopped++;
    if (s.state.terminated.exitCode === 0) n.succeeded++;
  } else if (s.state.waiting) {
    if (s.lastState.terminated) n.stopped++;
    else n.waiting++;
  } else {
    n.unknown++;
  }
}
