// The pure part of the PLEG: what changed between two listings of a pod, as lifecycle events,
// and whether a cached status already shows a listing.

import type { ContainerState, PodStatus, SandboxState } from "../kubecontainer/types.ts";

type PodLifecycleEventType =
  | "ContainerStarted"
  | "ContainerDied"
  | "ContainerRemoved"
  | "ContainerChanged"
  | "PodSync";

export interface PodLifecycleEvent {
  /** Pod UID. */
  uid: string;
  type: PodLifecycleEventType;
  /** The container (or sandbox) ID the event is about; empty for PodSync. */
  data: string;
}

/** One pod as listed by the runtime; kubecontainer.RunningPod fits, and sandbox states, when
 * given, turn a sandbox's death into events too. */
export interface RelistPod {
  uid: string;
  name: string;
  namespace: string;
  containers: { id: string; state: ContainerState }[];
  sandboxes?: { id: string; state: SandboxState }[];
}

type PlegState = "running" | "exited" | "unknown" | "non-existent";

export interface PodRecord {
  old?: RelistPod;
  current?: RelistPod;
}

/** Whether `status` has exactly the listed containers and sandboxes, each in its listed state. */
export function matchesListing(status: PodStatus, pod: RelistPod): boolean {
  if (pod.sandboxes === undefined) return false;
  if (status.containers.length !== pod.containers.length) return false;
  if (status.sandboxes.length !== pod.sandboxes.length) return false;
  for (const c of pod.containers) {
    if (status.containers.find((s) => s.id === c.id)?.state !== c.state) return false;
  }
  for (const sb of pod.sandboxes) {
    if (status.sandboxes.find((s) => s.id === sb.id)?.state !== sb.state) return false;
  }
  return true;
}

export function setCurrent(records: Map<string, PodRecord>, pods: RelistPod[]): void {
  for (const record of records.values()) record.current = undefined;
  for (const pod of pods) {
    const record = records.get(pod.uid);
    if (record) record.current = pod;
    else records.set(pod.uid, { current: pod });
  }
}

export function advance(records: Map<string, PodRecord>, uid: string, record: PodRecord): void {
  if (record.current) records.set(uid, { old: record.current });
  else records.delete(uid);
}

/** Events for every container and sandbox of the pod whose state changed between relists. */
export function computeEvents(
  uid: string,
  old: RelistPod | undefined,
  current: RelistPod | undefined,
): PodLifecycleEvent[] {
  const ids = new Set<string>();
  for (const pod of [old, current]) {
    for (const c of pod?.containers ?? []) ids.add(c.id);
    for (const s of pod?.sandboxes ?? []) ids.add(s.id);
  }
  const events: PodLifecycleEvent[] = [];
  for (const id of ids) {
    events.push(...eventsFor(uid, id, stateOf(old, id), stateOf(current, id)));
  }
  return events;
}

function stateOf(pod: RelistPod | undefined, id: string): PlegState {
  const container = pod?.containers.find((c) => c.id === id);
  if (container) {
    if (container.state === "running" || container.state === "exited") return container.state;
    return "unknown";
  }
  const sandbox = pod?.sandboxes?.find((s) => s.id === id);
  if (sandbox) return sandbox.state === "ready" ? "running" : "exited";
  return "non-existent";
}

function eventsFor(uid: string, id: string, from: PlegState, to: PlegState): PodLifecycleEvent[] {
  if (from === to) return [];
  const event = (type: PodLifecycleEventType) => ({ uid, type, data: id });
  switch (to) {
    case "running":
      return [event("ContainerStarted")];
    case "exited":
      return [event("ContainerDied")];
    case "unknown":
      return [event("ContainerChanged")];
    case "non-existent":
      return from === "exited"
        ? [event("ContainerRemoved")]
        : [event("ContainerDied"), event("ContainerRemoved")];
  }
}

/** A pod torn down after its network was removed still reports its last IPs, as the API
 * expects of a finished pod. */
export function keepPodIPs(previous: PodStatus | undefined, status: PodStatus): PodStatus {
  if (status.ips.length > 0 || !previous || previous.ips.length === 0) return status;
  if (status.sandboxes.some((s) => s.state === "ready")) return status;
  return { ...status, ips: previous.ips };
}
