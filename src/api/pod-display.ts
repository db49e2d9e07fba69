// The STATUS, READY and RESTARTS columns of `fleetlet get pods`, with kubectl's rules (printPod):
// the first init container that has not completed decides (Init:N/M, Init:<reason>,
// Init:ExitCode:N), else the last app container with a waiting or terminated reason, else the
// pod's reason or phase; "Terminating" while the pod is being deleted. An evicted pod reads
// "Evicted" whatever its containers say.

import { isSidecar } from "./containers.ts";
import type { Container, Pod } from "./types.ts";

export interface PodDisplay {
  /** e.g. "Running", "Init:0/1", "CrashLoopBackOff", "Completed", "Terminating". */
  status: string;
  /** Ready containers over containers (app and sidecar), e.g. "1/2". */
  ready: string;
  restarts: number;
  /** finishedAt of the newest previous termination counted in `restarts`, if any. */
  lastRestart?: string;
}

export interface DisplayOptions {
  /** The pod is being stopped though it has no deletionTimestamp (e.g. its manifest was removed). */
  terminating?: boolean;
}

interface Tally {
  reason: string;
  ready: number;
  restarts: number;
  lastRestart: string | undefined;
}

export function podDisplayStatus(pod: Pod, opts: DisplayOptions = {}): PodDisplay {
  const status = pod.status ?? {};
  const initSpecs = new Map<string, Container>();
  for (const c of pod.spec.initContainers ?? []) initSpecs.set(c.name, c);
  const sidecars = [...initSpecs.values()].filter(isSidecar).length;
  const total = pod.spec.containers.length + sidecars;
  const t: Tally = {
    reason: status.reason || status.phase || "",
    ready: 0,
    restarts: 0,
    lastRestart: undefined,
  };
  const sidecarTally = { restarts: 0, lastRestart: undefined as string | undefined };
  const initializing = tallyInit(pod, initSpecs, t, sidecarTally);
  const initializedTrue = status.conditions?.some(
    (c) => c.type === "Initialized" && c.status === "True",
  );
  if (!initializing || initializedTrue) {
    t.restarts = sidecarTally.restarts;
    t.lastRestart = sidecarTally.lastRestart;
    tallyApp(pod, t);
  }
  // fleetlet's one difference from kubectl (docs/kubelet-differences.md): an evicted pod reads
  // "Evicted", not its containers' last reason ("Error"), so that it stands out on a device.
  if (status.phase === "Failed" && status.reason === "Evicted") t.reason = "Evicted";
  const deleting = pod.metadata.deletionTimestamp !== undefined || opts.terminating === true;
  if (deleting && status.reason === "NodeLost") t.reason = "Unknown";
  else if (deleting && status.phase !== "Succeeded" && status.phase !== "Failed") {
    t.reason = "Terminating";
  }
  return {
    status: t.reason,
    ready: `${t.ready}/${total}`,
    restarts: t.restarts,
    ...(t.lastRestart ? { lastRestart: t.lastRestart } : {}),
  };
}

/** Returns whether an init container is still in the way of the app containers. */
function tallyInit(
  pod: Pod,
  specs: Map<string, Container>,
  t: Tally,
  sidecar: { restarts: number; lastRestart: string | undefined },
): boolean {
  const statuses = pod.status?.initContainerStatuses ?? [];
  const total = pod.spec.initContainers?.length ?? 0;
  for (const [i, s] of statuses.entries()) {
    const finished = s.lastState.terminated?.finishedAt;
    t.restarts += s.restartCount;
    t.lastRestart = later(t.lastRestart, finished);
    const spec = specs.get(s.name);
    if (isSidecar(spec)) {
      sidecar.restarts += s.restartCount;
      sidecar.lastRestart = later(sidecar.lastRestart, finished);
    }
    const term = s.state.terminated;
    if (term && term.exitCode === 0) continue;
    if (isSidecar(spec) && s.started === true) {
      if (s.ready) t.ready++;
      continue;
    }
    const waiting = s.state.waiting?.reason;
    if (term) t.reason = `Init:${terminatedReason(term)}`;
    else if (waiting && waiting !== "PodInitializing") t.reason = `Init:${waiting}`;
    else t.reason = `Init:${i}/${total}`;
    return true;
  }
  return false;
}

function tallyApp(pod: Pod, t: Tally): void {
  const statuses = pod.status?.containerStatuses ?? [];
  let hasRunning = false;
  for (let i = statuses.length - 1; i >= 0; i--) {
    const s = statuses[i];
    if (!s) continue;
    t.restarts += s.restartCount;
    t.lastRestart = later(t.lastRestart, s.lastState.terminated?.finishedAt);
    const waiting = s.state.waiting?.reason;
    const term = s.state.terminated;
    if (waiting) t.reason = waiting;
    else if (term) t.reason = terminatedReason(term);
    else if (s.ready && s.state.running) {
      hasRunning = true;
      t.ready++;
    }
  }
  if (t.reason === "Completed" && hasRunning) {
    const ready = pod.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
    t.reason = ready ? "Running" : "NotReady";
  }
}

function terminatedReason(term: { reason?: string; signal?: number; exitCode: number }): string {
  if (term.reason) return term.reason;
  return term.signal ? `Signal:${term.signal}` : `ExitCode:${term.exitCode}`;
}

/** RFC 3339 UTC times of one precision compare as strings. */
function later(a: string | undefined, b: string | undefined): string | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return b > a ? b : a;
}
