// What the hub serves: Kubernetes-shaped Nodes, Pods, Events and node Leases built from what
// agents reported, with the hub's own facts (online, last seen, pod count, revoked) as
// annotations, and the metadata the API server gives objects (uid, creationTimestamp). Pure.
import type { Lease, Node, NodeCondition } from "../api/node.ts";
import type { Event, Pod } from "../api/types.ts";
import { HUB_ANNOTATIONS } from "../protocol/index.ts";
import { derivedUid } from "./deploy/pods.ts";
import type { NodeRecord } from "./store.ts";

export function rfc3339(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(".000Z", "Z");
}

/** Ready as the control plane shows a node whose agent stopped posting status since `since`. */
function unknownReady(prev: NodeCondition | undefined, since: number): NodeCondition {
  return {
    type: "Ready",
    status: "Unknown",
    ...(prev?.lastHeartbeatTime !== undefined && { lastHeartbeatTime: prev.lastHeartbeatTime }),
    lastTransitionTime: rfc3339(since),
    reason: "NodeStatusUnknown",
    message: "fleetlet agent stopped posting node status.",
  };
}

export interface NodeFacts {
  online: boolean;
  /** When the node went offline (for the Ready condition's transition time). */
  offlineSince?: number;
  podCount: number;
  /** The device's clock minus the hub's (ms), when the agent sent its clock. */
  clockSkewMs?: number;
  /** The agent's last update.status as "<phase> <version>", when it sent one. */
  update?: string;
  /** When the device was last heard from, as this hub can tell (Fleet.lastSeen). */
  lastSeen?: number;
}

/** A signed duration rounded to the second, as Go prints it: "-3h0m12s", "45s", "0s". */
export function skewText(ms: number): string {
  const total = Math.round(Math.abs(ms) / 1000);
  const sign = total > 0 && ms < 0 ? "-" : "";
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (h > 0) return `${sign}${h}h${m}m${s}s`;
  return m > 0 ? `${sign}${m}m${s}s` : `${sign}${s}s`;
}

/** A node's uid: fixed by its name and when it joined (a node that joins again is a new one). */
function nodeUid(rec: NodeRecord): string {
  return derivedUid("Node", rec.name, String(rec.joinedAt));
}

/** The Node the hub serves for `rec`. */
export function nodeView(rec: NodeRecord, facts: NodeFacts): Node {
  const reported = rec.node;
  const annotations: Record<string, string> = {
    ...reported?.metadata.annotations,
    [HUB_ANNOTATIONS.online]: String(facts.online),
    [HUB_ANNOTATIONS.pods]: String(facts.podCount),
  };
  const lastSeen = facts.lastSeen ?? rec.lastSeen;
  if (lastSeen !== undefined) annotations[HUB_ANNOTATIONS.lastSeen] = rfc3339(lastSeen);
  if (rec.revokedAt !== undefined) annotations[HUB_ANNOTATIONS.revoked] = rfc3339(rec.revokedAt);
  if (facts.clockSkewMs !== undefined)
    annotations[HUB_ANNOTATIONS.clockSkew] = skewText(facts.clockSkewMs);
  if (facts.update !== undefined) annotations[HUB_ANNOTATIONS.update] = facts.update;
  let conditions = reported?.status.conditions;
  if (!facts.online && reported !== undefined) {
    const ready = conditions?.find((c) => c.type === "Ready");
    const since = facts.offlineSince ?? rec.lastSeen ?? rec.joinedAt;
    conditions = [
      unknownReady(ready, since),
      ...(conditions ?? []).filter((c) => c.type !== "Ready"),
    ];
  }
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      ...reported?.metadata,
      name: rec.name,
      labels: { ...reported?.metadata.labels, ...rec.hubLabels },
      annotations,
      uid: nodeUid(rec),
      creationTimestamp: rfc3339(rec.joinedAt),
    },
    spec: reported?.spec ?? {},
    status: { ...reported?.status, ...(conditions !== undefined && { conditions }) },
  };
}

/** A reported pod as the hub serves it: bound to its node. */
export function podView(node: string, pod: Pod): Pod {
  return pod.spec.nodeName === node ? pod : { ...pod, spec: { ...pod.spec, nodeName: node } };
}

/** A reported event as the hub serves it: its source host is the node, its uid fixed by the
 * node and its name, created when it first happened. */
export function eventView(node: string, event: Event): Event {
  const ns = event.metadata.namespace ?? "default";
  return {
    ...event,
    metadata: {
      uid: derivedUid("Event", node, ns, event.metadata.name),
      creationTimestamp: event.firstTimestamp,
      ...event.metadata,
    },
    source: { ...event.source, host: node },
  };
}

/** The namespace of node Leases, and the duration the kubelet gives its lease. */
export const NODE_LEASE_NAMESPACE = "kube-node-lease";
const NODE_LEASE_DURATION_SECONDS = 40;

/** RFC 3339 with microseconds, as a MicroTime. */
function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

/** The node's Lease as its kubelet would keep it, renewed at each message the hub receives
 * from the device (`lastSeen`: as Fleet.lastSeen tells it); undefined for a node that never
 * connected. Its resourceVersion is the renew time in milliseconds. */
export function leaseView(rec: NodeRecord, lastSeen = rec.lastSeen): Lease | undefined {
  if (lastSeen === undefined) return undefined;
  return {
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: {
      name: rec.name,
      namespace: NODE_LEASE_NAMESPACE,
      uid: derivedUid("Lease", rec.name, String(rec.joinedAt)),
      creationTimestamp: rfc3339(rec.joinedAt),
      resourceVersion: String(lastSeen),
      ownerReferences: [{ apiVersion: "v1", kind: "Node", name: rec.name, uid: nodeUid(rec) }],
    },
    spec: {
      holderIdentity: rec.name,
      leaseDurationSeconds: NODE_LEASE_DURATION_SECONDS,
      renewTime: microTime(lastSeen),
    },
  };
}
