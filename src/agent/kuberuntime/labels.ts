// The labels and annotations fleetlet writes on sandboxes and containers, and reading them back
// (docs/runtime-contract.md). After an agent restart these are all that identify a pod's objects.

import type { Container, ContainerPort, LifecycleHandler, Pod } from "../../api/types.ts";
import type { Labels } from "../../cri/index.ts";
import { hashContainer } from "./hash.ts";

export const LABEL_POD_NAME = "io.kubernetes.pod.name";
export const LABEL_POD_NAMESPACE = "io.kubernetes.pod.namespace";
export const LABEL_POD_UID = "io.kubernetes.pod.uid";
export const LABEL_CONTAINER_NAME = "io.kubernetes.container.name";
const LABEL_MANAGED = "io.fleetlet.managed";
/** The node name of the agent that created the object: an agent only manages its own node's. */
const LABEL_NODE = "io.fleetlet.node";
export const ANNOTATION_HASH = "io.kubernetes.container.hash";
const ANNOTATION_RESTART_COUNT = "io.kubernetes.container.restartCount";
const ANNOTATION_TERMINATION_MESSAGE_PATH = "io.kubernetes.container.terminationMessagePath";
const ANNOTATION_TERMINATION_MESSAGE_POLICY = "io.kubernetes.container.terminationMessagePolicy";
const ANNOTATION_GRACE_PERIOD = "io.kubernetes.pod.terminationGracePeriod";
const ANNOTATION_PRESTOP = "io.kubernetes.container.preStopHandler";
const ANNOTATION_PORTS = "io.kubernetes.container.ports";

/** The selector of everything fleetlet created. */
export const MANAGED_SELECTOR: Labels = { [LABEL_MANAGED]: "true" };

/** The selector of everything the agent of `nodeName` created. */
export function nodeSelector(nodeName: string): Labels {
  return { [LABEL_MANAGED]: "true", [LABEL_NODE]: nodeName };
}

function ours(pod: Pod): Labels {
  return { [LABEL_MANAGED]: "true", [LABEL_NODE]: pod.spec.nodeName ?? "" };
}

function podIdentity(pod: Pod): Labels {
  return {
    [LABEL_POD_NAME]: pod.metadata.name,
    [LABEL_POD_NAMESPACE]: pod.metadata.namespace ?? "default",
    [LABEL_POD_UID]: pod.metadata.uid ?? "",
  };
}

/** The pod's own labels, then ours (ours win on a clash). */
export function sandboxLabels(pod: Pod): Labels {
  return { ...pod.metadata.labels, ...podIdentity(pod), ...ours(pod) };
}

export function sandboxAnnotations(pod: Pod): Labels {
  return { ...pod.metadata.annotations };
}

export function containerLabels(pod: Pod, container: Container): Labels {
  return { ...podIdentity(pod), [LABEL_CONTAINER_NAME]: container.name, ...ours(pod) };
}

export function containerAnnotations(pod: Pod, container: Container, restartCount: number): Labels {
  const out: Labels = {
    [ANNOTATION_HASH]: hashContainer(container),
    [ANNOTATION_RESTART_COUNT]: String(restartCount),
    [ANNOTATION_TERMINATION_MESSAGE_PATH]: container.terminationMessagePath ?? "",
    [ANNOTATION_TERMINATION_MESSAGE_POLICY]: container.terminationMessagePolicy ?? "File",
  };
  const grace = pod.spec.terminationGracePeriodSeconds;
  if (grace !== undefined) out[ANNOTATION_GRACE_PERIOD] = String(grace);
  if (container.lifecycle?.preStop)
    out[ANNOTATION_PRESTOP] = JSON.stringify(container.lifecycle.preStop);
  if (container.ports?.length) out[ANNOTATION_PORTS] = JSON.stringify(container.ports);
  return out;
}

/** What a container's annotations tell about it; absent or malformed values are undefined. */
export interface ContainerAnnotationInfo {
  hash: string;
  restartCount: number;
  terminationMessagePath: string;
  terminationMessagePolicy: string;
  terminationGracePeriodSeconds?: number;
  preStop?: LifecycleHandler;
  ports?: ContainerPort[];
}

function parseJson<T>(text: string | undefined): T | undefined {
  if (!text) return undefined;
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}

function parseCount(text: string | undefined): number | undefined {
  if (text === undefined || !/^\d+$/.test(text)) return undefined;
  return Number(text);
}

export function readContainerAnnotations(a: Labels): ContainerAnnotationInfo {
  const info: ContainerAnnotationInfo = {
    hash: a[ANNOTATION_HASH] ?? "",
    restartCount: parseCount(a[ANNOTATION_RESTART_COUNT]) ?? 0,
    terminationMessagePath: a[ANNOTATION_TERMINATION_MESSAGE_PATH] ?? "",
    terminationMessagePolicy: a[ANNOTATION_TERMINATION_MESSAGE_POLICY] ?? "",
  };
  const grace = parseCount(a[ANNOTATION_GRACE_PERIOD]);
  if (grace !== undefined) info.terminationGracePeriodSeconds = grace;
  const preStop = parseJson<LifecycleHandler>(a[ANNOTATION_PRESTOP]);
  if (preStop) info.preStop = preStop;
  const ports = parseJson<ContainerPort[]>(a[ANNOTATION_PORTS]);
  if (Array.isArray(ports)) info.ports = ports;
  return info;
}
