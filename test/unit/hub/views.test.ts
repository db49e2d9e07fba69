// What the hub serves of what devices reported: the metadata the API server would give them.
import { describe, expect, test } from "bun:test";
import type { Event } from "../../../src/api/types.ts";
import type { NodeRecord } from "../../../src/hub/store.ts";
import { eventView, leaseView, nodeView } from "../../../src/hub/views.ts";

const rec = (over: Partial<NodeRecord> = {}): NodeRecord => ({
  name: "cam-1",
  credentialHash: "h",
  hubLabels: {},
  joinedAt: Date.parse("2026-02-01T08:00:00.250Z"),
  ackedSeq: 0,
  connected: true,
  desiredGeneration: 0,
  ackedGeneration: 0,
  ...over,
});

const event: Event = {
  apiVersion: "v1",
  kind: "Event",
  metadata: { name: "web.1", namespace: "default" },
  involvedObject: { kind: "Pod", name: "web", namespace: "default" },
  reason: "Started",
  message: "Started container main",
  type: "Normal",
  source: { component: "kubelet" },
  count: 1,
  firstTimestamp: "2026-02-01T08:01:00Z",
  lastTimestamp: "2026-02-01T08:02:00Z",
};

describe("views", () => {
  test("leaseView() is the kubelet's node lease, renewed at the node's last message", () => {
    const lease = leaseView(rec({ lastSeen: Date.parse("2026-02-01T09:00:05.123Z") }));
    expect(lease).toMatchObject({
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: {
        name: "cam-1",
        namespace: "kube-node-lease",
        creationTimestamp: "2026-02-01T08:00:00Z",
        resourceVersion: String(Date.parse("2026-02-01T09:00:05.123Z")),
      },
      spec: {
        holderIdentity: "cam-1",
        leaseDurationSeconds: 40,
        renewTime: "2026-02-01T09:00:05.123000Z",
      },
    });
    const node = nodeView(rec(), { online: true, podCount: 0 });
    expect(lease?.metadata.ownerReferences).toEqual([
      { apiVersion: "v1", kind: "Node", name: "cam-1", uid: node.metadata.uid ?? "" },
    ]);
    expect(leaseView(rec())).toBeUndefined();
  });

  test("a node's uid is fixed by its name and join time: the same on every read, new on a new join", () => {
    const a = nodeView(rec(), { online: true, podCount: 0 }).metadata.uid;
    expect(a).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(nodeView(rec(), { online: false, podCount: 3 }).metadata.uid).toBe(a);
    expect(nodeView(rec({ joinedAt: 1 }), { online: true, podCount: 0 }).metadata.uid).not.toBe(a);
  });

  test("eventView() gives an event a uid and its first time as creationTimestamp", () => {
    const v = eventView("cam-1", event);
    expect(v.metadata.creationTimestamp).toBe("2026-02-01T08:01:00Z");
    expect(v.metadata.uid).toBe(eventView("cam-1", { ...event, count: 2 }).metadata.uid);
    expect(v.metadata.uid).not.toBe(eventView("cam-2", event).metadata.uid);
    expect(v.source.host).toBe("cam-1");
  });
});
