// The columns of each kind as the API server's table printers make them (kubectl get): their
// definitions (priority 1 = only with -o wide) and each object's cells. The hub serves them as
// meta.k8s.io Tables; the CLI prints the same cells. `now` is passed in: nothing reads the clock.

import type { ControllerRevision, DaemonSet } from "./daemonset.ts";
import { humanDuration } from "./duration.ts";
import type { Lease, Node } from "./node.ts";
import { podDisplayStatus } from "./pod-display.ts";
import type { ConfigMap, Event, Pod, Secret } from "./types.ts";

export interface Column {
  name: string;
  type: "string" | "integer";
  format?: "name";
  description: string;
  /** 0: always shown; 1: with -o wide. */
  priority: 0 | 1;
}

export type Cell = string | number;

/** The columns of one kind and the cells of one object of it. */
export interface TableKind<T> {
  columns: Column[];
  cells(object: T, now: number): Cell[];
}

const col = (name: string, description: string, priority: 0 | 1 = 0): Column => ({
  name,
  type: "string",
  description,
  priority,
});
const int = (name: string, description: string): Column => ({
  name,
  type: "integer",
  description,
  priority: 0,
});
const nameColumn: Column = {
  name: "Name",
  type: "string",
  format: "name",
  description: "The object's name, unique in its namespace.",
  priority: 0,
};
const ageColumn = col("Age", "Time since the object was created.");

/** kubectl's translateTimestampSince: the age of an RFC 3339 time, "<unknown>" when unset. */
export function age(time: string | undefined, now: number): string {
  if (time === undefined || time === "") return "<unknown>";
  const t = Date.parse(time);
  return Number.isNaN(t) ? "<unknown>" : humanDuration(now - t);
}

export interface PodColumns {
  /** READY, e.g. "1/2" (sidecar init containers count as containers). */
  ready: string;
  /** STATUS, e.g. "Running", "Init:1/2", "CrashLoopBackOff", "Terminating". */
  status: string;
  /** RESTARTS, e.g. "3 (10s ago)". */
  restarts: string;
}

/** kubectl's READY, STATUS and RESTARTS cells for a pod (printPod). */
export function podColumns(pod: Pod, now: number): PodColumns {
  const d = podDisplayStatus(pod);
  const last = d.lastRestart === undefined ? Number.NaN : Date.parse(d.lastRestart);
  const restarts =
    d.restarts !== 0 && !Number.isNaN(last)
      ? `${d.restarts} (${humanDuration(now - last)} ago)`
      : String(d.restarts);
  return { ready: d.ready, status: d.status, restarts };
}

export const podTable: TableKind<Pod> = {
  columns: [
    nameColumn,
    col("Ready", "How many of the pod's containers are ready."),
    col("Status", "The aggregate status of the pod's containers."),
    col("Restarts", "How often the pod's containers restarted, and when last."),
    ageColumn,
    col("IP", "The pod's IP address.", 1),
    col("Node", "The node (device) the pod runs on.", 1),
    col("Nominated Node", "The node a preempting pod waits for.", 1),
    col("Readiness Gates", "Extra conditions of the pod's readiness.", 1),
  ],
  cells(pod, now) {
    const d = podColumns(pod, now);
    const ip = pod.status?.podIPs?.[0]?.ip || pod.status?.podIP || "<none>";
    // A pod on a device is never nominated, and the hub has no readiness gates.
    return [
      pod.metadata.name,
      d.ready,
      d.status,
      d.restarts,
      age(pod.metadata.creationTimestamp, now),
      ip,
      pod.spec.nodeName || "<none>",
      "<none>",
      "<none>",
    ];
  },
};

/** STATUS: the Ready condition as "Ready", "NotReady" or "Unknown", then ",SchedulingDisabled". */
export function nodeStatusColumn(node: Node): string {
  const ready = node.status.conditions?.find((c) => c.type === "Ready");
  let s = ready?.status === "True" ? "Ready" : ready?.status === "False" ? "NotReady" : "Unknown";
  if (node.spec.unschedulable) s += ",SchedulingDisabled";
  return s;
}

export const nodeTable: TableKind<Node> = {
  columns: [
    nameColumn,
    col("Status", "The node's Ready condition."),
    col("Roles", "The node's roles."),
    ageColumn,
    col("Version", "The agent's version."),
    col("Internal-IP", "The node's internal address.", 1),
    col("External-IP", "The node's external address.", 1),
    col("OS-Image", "The node's operating system.", 1),
    col("Kernel-Version", "The node's kernel.", 1),
    col("Container-Runtime", "The node's container runtime.", 1),
  ],
  cells(n, now) {
    const info = n.status.nodeInfo;
    const addr = (t: string) => n.status.addresses?.find((a) => a.type === t)?.address ?? "<none>";
    return [
      n.metadata.name,
      nodeStatusColumn(n),
      "<none>",
      age(n.metadata.creationTimestamp, now),
      info?.kubeletVersion ?? "",
      addr("InternalIP"),
      addr("ExternalIP"),
      info?.osImage || "<unknown>",
      info?.kernelVersion || "<unknown>",
      info?.containerRuntimeVersion || "<unknown>",
    ];
  },
};

/** The OBJECT column of `kubectl get events`: "pod/web", or the kind alone. */
export function eventTarget(e: Event): string {
  const kind = (e.involvedObject.kind ?? "").toLowerCase();
  return e.involvedObject.name ? `${kind}/${e.involvedObject.name}` : kind;
}

export const eventTable: TableKind<Event> = {
  columns: [
    col("Last Seen", "When the event was last seen."),
    col("Type", "Normal or Warning."),
    col("Reason", "Why the event happened, in one word."),
    col("Object", "The object the event is about."),
    col("Subobject", "The part of the object (a container).", 1),
    col("Source", "Who recorded the event.", 1),
    col("Message", "What happened."),
    col("First Seen", "When the event was first seen.", 1),
    { ...int("Count", "How often the event happened."), priority: 1 },
    { ...col("Name", "The event's name.", 1), format: "name" },
  ],
  cells(e, now) {
    const source = [e.source.component, e.source.host].filter((x) => x).join(", ");
    return [
      age(e.lastTimestamp, now),
      e.type,
      e.reason,
      eventTarget(e),
      e.involvedObject.fieldPath ?? "",
      source,
      e.message.trim(),
      age(e.firstTimestamp, now),
      e.count ?? 1,
      e.metadata.name,
    ];
  },
};

/** "app in (a),tier=x" of a label selector. */
function selectorText(sel: DaemonSet["spec"]["selector"]): string {
  const parts = Object.entries(sel.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const e of sel.matchExpressions ?? []) {
    const op = e.operator.toLowerCase();
    parts.push(
      op === "exists"
        ? e.key
        : op === "doesnotexist"
          ? `!${e.key}`
          : `${e.key} ${op} (${(e.values ?? []).join(",")})`,
    );
  }
  return parts.join(",") || "<none>";
}

export const daemonSetTable: TableKind<DaemonSet> = {
  columns: [
    nameColumn,
    int("Desired", "Devices that should run the pod."),
    int("Current", "Devices that run a pod of it."),
    int("Ready", "Devices whose pod is ready."),
    int("Up-to-date", "Devices that run the current template."),
    int("Available", "Devices whose pod is available."),
    col("Node Selector", "The devices the DaemonSet selects."),
    ageColumn,
    col("Containers", "The template's containers.", 1),
    col("Images", "The template's images.", 1),
    col("Selector", "The pods the DaemonSet owns.", 1),
  ],
  cells(d, now) {
    const s = d.status;
    const nodeSelector = Object.entries(d.spec.template.spec.nodeSelector ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join(",");
    const cs = d.spec.template.spec.containers;
    return [
      d.metadata.name,
      s?.desiredNumberScheduled ?? 0,
      s?.currentNumberScheduled ?? 0,
      s?.numberReady ?? 0,
      s?.updatedNumberScheduled ?? 0,
      s?.numberAvailable ?? 0,
      nodeSelector || "<none>",
      age(d.metadata.creationTimestamp, now),
      cs.map((c) => c.name).join(","),
      cs.map((c) => c.image).join(","),
      selectorText(d.spec.selector),
    ];
  },
};

const keys = (o: Record<string, unknown> | undefined) => Object.keys(o ?? {}).length;

export const configMapTable: TableKind<ConfigMap> = {
  columns: [nameColumn, int("Data", "How many keys it holds."), ageColumn],
  cells: (c, now) => [
    c.metadata.name,
    keys(c.data) + keys(c.binaryData),
    age(c.metadata.creationTimestamp, now),
  ],
};

export const secretTable: TableKind<Secret> = {
  columns: [
    nameColumn,
    col("Type", "The secret's type."),
    int("Data", "How many keys it holds."),
    ageColumn,
  ],
  cells: (s, now) => [
    s.metadata.name,
    s.type ?? "Opaque",
    keys(s.data) + keys(s.stringData),
    age(s.metadata.creationTimestamp, now),
  ],
};

export const controllerRevisionTable: TableKind<ControllerRevision> = {
  columns: [
    nameColumn,
    col("Controller", "The object that owns the revision."),
    int("Revision", "The revision's number."),
    ageColumn,
  ],
  cells(r, now) {
    const owner = r.metadata.ownerReferences?.[0];
    return [
      r.metadata.name,
      owner === undefined ? "<none>" : `${owner.kind.toLowerCase()}.apps/${owner.name}`,
      r.revision,
      age(r.metadata.creationTimestamp, now),
    ];
  },
};

export const leaseTable: TableKind<Lease> = {
  columns: [nameColumn, col("Holder", "The lease's holder."), ageColumn],
  cells: (l, now) => [
    l.metadata.name,
    l.spec.holderIdentity ?? "",
    age(l.metadata.creationTimestamp, now),
  ],
};
