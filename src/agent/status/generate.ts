// generatePodStatus(): the v1 status of one pod from what the runtime reports, the probe
// results and the last sync's failures, with kubelet's rules (generateAPIPodStatus). Pure: the
// caller passes everything, including the previous status and the time.
//
// Invariants: a pod never leaves Succeeded or Failed; startTime and the lastTransitionTime of an
// unchanged condition never change; containerStatuses and initContainerStatuses follow spec
// order and hold one entry per spec container.

import { getPodQOS } from "../../api/qos.ts";
import type {
  ContainerStatus,
  Pod,
  PodCondition,
  PodPhase,
  PodQOSClass,
  PodStatus,
} from "../../api/types.ts";
import type * as kc from "../kubecontainer/types.ts";
import {
  containersReadyCondition,
  initializedCondition,
  KUBELET_CONDITIONS,
  keepTransitionTimes,
  podReadyToStartContainersCondition,
  readyCondition,
  readyToStartContainers,
} from "./conditions.ts";
import { convertContainerStatuses } from "./containers.ts";
import { getPodPhase } from "./phase.ts";
import { applyProbeResults, type ProbeResults } from "./probes.ts";
import { type SyncError, toRFC3339 } from "./reasons.ts";

export interface GeneratePodStatusInput {
  /** The pod, with defaults applied. */
  pod: Pod;
  /** What the runtime reports for the pod; undefined when it has nothing (not started yet). */
  runtime: kc.PodStatus | undefined;
  /** Epoch ms; used for startTime and changed conditions. */
  now: number;
  /** The node's IP: status.hostIP, and podIP of host-network pods. */
  hostIP: string;
  /** Readiness probe results; consulted only for containers with a readiness probe. */
  readiness?: ProbeResults;
  /** Startup probe results; consulted only for containers with a startup probe. */
  startup?: ProbeResults;
  /** The last sync's failure per container name (ErrImagePull, CrashLoopBackOff, ...). */
  syncErrors?: ReadonlyMap<string, SyncError>;
  /** The status generated last time, if any. */
  previous?: PodStatus;
  /** The pod is being stopped (deleted or replaced): Ready is False, nothing restarts. */
  terminating?: boolean;
  /** The pod will not run again whatever its restart policy (kubelet's podIsTerminal): when all
   * containers have stopped the phase is Succeeded or Failed. */
  terminal?: boolean;
  /** Computed from the spec when absent. */
  qosClass?: PodQOSClass;
  /** Forces phase Failed with this reason, e.g. {reason: "Evicted", message: "..."}. */
  failure?: { reason: string; message: string };
  /** Conditions set by the agent beyond the kubelet's own (e.g. DisruptionTarget on an
   * eviction); they replace a previous condition of the same type. */
  extraConditions?: readonly PodCondition[];
}

export function generatePodStatus(input: GeneratePodStatusInput): PodStatus {
  const { pod, runtime, previous } = input;
  const deleting = input.terminating === true || pod.metadata.deletionTimestamp !== undefined;
  const common = { pod, runtime, deleting, syncErrors: input.syncErrors ?? new Map() };
  const init = convertContainerStatuses({
    ...common,
    containers: pod.spec.initContainers ?? [],
    isInit: true,
    previous: previous?.initContainerStatuses,
  });
  const app = convertContainerStatuses({
    ...common,
    containers: pod.spec.containers,
    isInit: false,
    previous: previous?.containerStatuses,
  });
  applyProbeResults(pod, init, app, input);
  const phase = decidePhase(input, init, app);
  const status: PodStatus = {
    phase: phase.phase,
    conditions: buildConditions(input, init, app, phase.phase),
    ...(phase.reason ? { reason: phase.reason } : {}),
    ...(phase.message ? { message: phase.message } : {}),
    hostIP: input.hostIP,
    hostIPs: input.hostIP ? [{ ip: input.hostIP }] : [],
    ...podIPs(input),
    startTime: previous?.startTime ?? toRFC3339(input.now),
    qosClass: input.qosClass ?? getPodQOS(pod),
    ...(init.length > 0 ? { initContainerStatuses: init } : {}),
    containerStatuses: app,
  };
  return status;
}

interface PhaseResult {
  phase: PodPhase;
  reason?: string;
  message?: string;
}

function decidePhase(
  input: GeneratePodStatusInput,
  init: ContainerStatus[],
  app: ContainerStatus[],
): PhaseResult {
  const { pod, previous, failure } = input;
  if (failure) return { phase: "Failed", reason: failure.reason, message: failure.message };
  let phase = getPodPhase(pod, init, app, {
    terminal: input.terminal === true,
    initialized: anyActiveAppContainer(pod, input.runtime),
  });
  for (const earlier of [previous?.phase, pod.status?.phase]) {
    if (!isTerminal(phase) && isTerminal(earlier)) phase = earlier as PodPhase;
  }
  if (phase !== previous?.phase) return { phase };
  const reason = previous.reason || pod.status?.reason;
  const message = previous.message || pod.status?.message;
  return { phase, ...(reason ? { reason } : {}), ...(message ? { message } : {}) };
}

function isTerminal(phase: PodPhase | undefined): boolean {
  return phase === "Succeeded" || phase === "Failed";
}

/** An app container exists in the newest sandbox (kubelet's HasAnyActiveRegularContainerStarted). */
function anyActiveAppContainer(pod: Pod, runtime: kc.PodStatus | undefined): boolean {
  const sandbox = runtime?.sandboxes[0];
  if (!runtime || !sandbox) return false;
  const names = new Set(pod.spec.containers.map((c) => c.name));
  return runtime.containers.some((c) => c.sandboxId === sandbox.id && names.has(c.name));
}

function buildConditions(
  input: GeneratePodStatusInput,
  init: ContainerStatus[],
  app: ContainerStatus[],
  phase: PodPhase,
): PodCondition[] {
  const { pod, previous } = input;
  const extra = input.extraConditions ?? [];
  const carried = [
    ...(previous?.conditions ?? []).filter(
      (c) => !KUBELET_CONDITIONS.has(c.type) && !extra.some((e) => e.type === c.type),
    ),
    ...extra,
  ];
  const containersReady = containersReadyCondition(pod, init, app, phase);
  const conditions: PodCondition[] = [
    ...carried,
    podReadyToStartContainersCondition(readyToStartContainers(pod, input.runtime)),
    initializedCondition(pod, init, app, phase),
    readyCondition(containersReady, input.terminating === true),
    containersReady,
    { type: "PodScheduled", status: "True" },
  ];
  return keepTransitionTimes(conditions, previous?.conditions, input.now);
}

/** Pod IPs from the runtime (newest sandbox); a host-network pod has the node's IP. */
function podIPs(input: GeneratePodStatusInput): Pick<PodStatus, "podIP" | "podIPs"> {
  const { runtime } = input;
  let ips = runtime?.ips.length ? runtime.ips : (runtime?.sandboxes[0]?.ips ?? []);
  if (input.pod.spec.hostNetwork && ips.length === 0 && input.hostIP) ips = [input.hostIP];
  if (ips.length === 0) return {};
  return { podIP: ips[0], podIPs: ips.map((ip) => ({ ip })) };
}
