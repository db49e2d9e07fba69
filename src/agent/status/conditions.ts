// The kubelet-owned pod conditions (PodReadyToStartContainers, Initialized, Ready,
// ContainersReady, PodScheduled), their reasons and messages, and the rule that keeps a
// condition's lastTransitionTime while its status does not change.

import { isSidecar } from "../../api/containers.ts";
import type {
  ContainerStatus,
  Pod,
  PodCondition,
  PodConditionType,
  PodPhase,
} from "../../api/types.ts";
import type * as kc from "../kubecontainer/types.ts";
import {
  ContainersNotInitialized,
  ContainersNotReady,
  goList,
  PodCompleted,
  PodFailed,
  PodTerminating,
  toRFC3339,
} from "./reasons.ts";

/** Conditions kubelet sets; any other condition of the previous status is carried over. */
export const KUBELET_CONDITIONS: ReadonlySet<PodConditionType> = new Set([
  "PodScheduled",
  "PodReadyToStartContainers",
  "Initialized",
  "ContainersReady",
  "Ready",
]);

/** True when the newest sandbox is the only ready one and has its network (kubelet: no new
 * sandbox is needed). */
export function readyToStartContainers(pod: Pod, runtime: kc.PodStatus | undefined): boolean {
  const sandboxes = runtime?.sandboxes ?? [];
  const newest = sandboxes[0];
  if (newest?.state !== "ready") return false;
  if (sandboxes.filter((s) => s.state === "ready").length > 1) return false;
  const hostNetwork = pod.spec.hostNetwork === true;
  if (newest.hostNetwork !== hostNetwork) return false;
  return hostNetwork || newest.ips.length > 0;
}

export function podReadyToStartContainersCondition(ready: boolean): PodCondition {
  return { type: "PodReadyToStartContainers", status: ready ? "True" : "False" };
}

export function initializedCondition(
  pod: Pod,
  init: ContainerStatus[],
  app: ContainerStatus[],
  phase: PodPhase,
): PodCondition {
  const byName = new Map(init.map((s) => [s.name, s]));
  const unknown: string[] = [];
  const incomplete: string[] = [];
  for (const c of pod.spec.initContainers ?? []) {
    const s = byName.get(c.name);
    if (!s) unknown.push(c.name);
    else if (isSidecar(c) ? s.started !== true : !s.ready) incomplete.push(c.name);
  }
  if (phase === "Succeeded" && unknown.length === 0) {
    return { type: "Initialized", status: "True", reason: PodCompleted };
  }
  const appNames = new Set(pod.spec.containers.map((c) => c.name));
  if (app.some((s) => appNames.has(s.name) && (s.state.running || s.state.terminated))) {
    return { type: "Initialized", status: "True" };
  }
  const message = describe(unknown, incomplete, "incomplete");
  if (message) {
    return { type: "Initialized", status: "False", reason: ContainersNotInitialized, message };
  }
  return { type: "Initialized", status: "True" };
}

export function containersReadyCondition(
  pod: Pod,
  init: ContainerStatus[],
  app: ContainerStatus[],
  phase: PodPhase,
): PodCondition {
  const byName = new Map([...init, ...app].map((s) => [s.name, s]));
  const unknown: string[] = [];
  const unready: string[] = [];
  const watched = [...(pod.spec.initContainers ?? []).filter(isSidecar), ...pod.spec.containers];
  for (const c of watched) {
    const s = byName.get(c.name);
    if (!s) unknown.push(c.name);
    else if (!s.ready) unready.push(c.name);
  }
  if ((phase === "Succeeded" && unknown.length === 0) || phase === "Failed") {
    const reason = phase === "Failed" ? PodFailed : PodCompleted;
    return { type: "ContainersReady", status: "False", reason };
  }
  const message = describe(unknown, unready, "unready");
  if (message) {
    return { type: "ContainersReady", status: "False", reason: ContainersNotReady, message };
  }
  return { type: "ContainersReady", status: "True" };
}

/** Ready follows ContainersReady, and is False while the pod is being stopped. */
export function readyCondition(containersReady: PodCondition, terminating: boolean): PodCondition {
  if (containersReady.status !== "True") {
    return { ...containersReady, type: "Ready" };
  }
  if (terminating) {
    return {
      type: "Ready",
      status: "False",
      reason: PodTerminating,
      message: "the pod is being stopped",
    };
  }
  return { type: "Ready", status: "True" };
}

function describe(unknown: string[], bad: string[], word: string): string {
  const parts: string[] = [];
  if (unknown.length > 0) parts.push(`containers with unknown status: ${goList(unknown)}`);
  if (bad.length > 0) parts.push(`containers with ${word} status: ${goList(bad)}`);
  return parts.join(", ");
}

/**
 * Sets each condition's lastTransitionTime: the previous one when the previous condition of
 * the same type had the same status, else the condition's own time, else `now`. Returns new
 * objects; the inputs are not changed.
 */
export function keepTransitionTimes(
  conditions: PodCondition[],
  previous: PodCondition[] | undefined,
  now: number,
): PodCondition[] {
  return conditions.map((c) => {
    const prev = previous?.find((p) => p.type === c.type);
    if (prev && prev.status === c.status && prev.lastTransitionTime) {
      return { ...c, lastTransitionTime: prev.lastTransitionTime };
    }
    return { ...c, lastTransitionTime: c.lastTransitionTime ?? toRFC3339(now) };
  });
}
