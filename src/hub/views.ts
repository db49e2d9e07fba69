// What the hub serves: Kubernetes-shaped Nodes, Pods and Events built from what agents reported,
// with the hub's own facts (online, last seen, pod count, revoked) as annotations. Pure.
import type { Node, NodeCondition } from "../api/node.ts";
import type { Event, Pod } from "../api/types.ts";
import { HUB_ANNOTATIONS } from "../protocol/index.ts";
import type { NodeRecord } from "./store.ts";

function rfc3339(ms: number): string {
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
}

/** The Node the hub serves for `rec`. */
export function nodeView(rec: NodeRecord, facts: NodeFacts): Node {
  const reported = rec.node;
  const annotations: Record<string, string> = {
    ...reported?.metadata.annotations,
    [HUB_ANNOTATIONS.online]: String(facts.online),
    [HUB_ANNOTATIONS.pods]: String(facts.podCount),
  };
  if (rec.lastSeen !== undefined) annotations[HUB_ANNOTATIONS.lastSeen] = rfc3339(rec.lastSeen);
  if (rec.revokedAt !== undefined) annotations[HUB_ANNOTATIONS.revoked] = rfc3339(rec.revokedAt);
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

/** A reported event as the hub serves it: its source host is the node. */
export function eventView(node: string, event: Event): Event {
  return event.source.host === node ? event : { ...event, source: { ...event.source, host: node } };
}
