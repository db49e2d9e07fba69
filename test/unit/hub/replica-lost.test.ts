// A node this replica held and lost (another replica took it, or the leader released it while
// this replica was stopped: src/hub/dead-holders.ts): the replica's view follows the stored rows
// of the node from then on (fleet-replica.ts).
import { describe, expect, test } from "bun:test";
import { ReplicaFleet } from "../../../src/hub/fleet-replica.ts";
import type { NodeRecord } from "../../../src/hub/store.ts";
import { SqliteHubStore } from "../../../src/hub/store-sqlite.ts";
import { leaseView } from "../../../src/hub/views.ts";

const record = (online: boolean): NodeRecord => ({
  ...{ name: "cam-1", credentialHash: "c", hubLabels: {}, joinedAt: 0, ackedSeq: 0 },
  ...{ connected: true, desiredGeneration: 0, ackedGeneration: 0, online },
  ...(!online && { offlineSince: 5000 }),
});

describe("ReplicaFleet, a node lost to another replica or released", () => {
  test("shown online until a stored row says otherwise, then as stored", async () => {
    const store = new SqliteHubStore(":memory:");
    const loaded = { ...(await store.load()), nodes: [record(true)] };
    const opts = { store, maxEventsPerNode: 10, offlineAfterMs: 3000, onChange: () => {} };
    const fleet = new ReplicaFleet({ ...opts, now: () => 0, storedOnline: true }, loaded);
    const hello = { type: "hello" as const, protocolVersion: 1, nodeName: "cam-1" };
    fleet.connect("cam-1", { ...hello, agentVersion: "t", streamId: "s" }, 0);
    expect(fleet.applyStoredNode(record(false)).taken).toBe(false);
    expect(fleet.isOnline("cam-1")).toBe(true);

    fleet.heldElsewhere("cam-1");
    expect([fleet.holds("cam-1"), fleet.isOnline("cam-1")]).toEqual([false, true]);
    // Its own liveness check no longer marks it offline.
    expect(fleet.checkLiveness(60_000)).toEqual([]);
    expect(fleet.applyStoredNode(record(false)).taken).toBe(true);
    expect(fleet.isOnline("cam-1")).toBe(false);
    expect(fleet.view("cam-1")?.metadata.annotations?.["hub.fleetlet.io/online"]).toBe("false");
  });

  test("a node another replica stores online is shown seen now (its holder stores when only with other writes); offline: when stored", async () => {
    const store = new SqliteHubStore(":memory:");
    let now = 100_000;
    const loaded = { ...(await store.load()), nodes: [{ ...record(true), lastSeen: 1_000 }] };
    const opts = { store, maxEventsPerNode: 10, offlineAfterMs: 3000, onChange: () => {} };
    const fleet = new ReplicaFleet({ ...opts, now: () => now, storedOnline: true }, loaded);
    const seen = () => fleet.view("cam-1")?.metadata.annotations?.["hub.fleetlet.io/last-seen"];
    expect(seen()).toBe(new Date(100_000).toISOString().replace(/\.\d+Z$/, "Z"));
    expect(
      leaseView(fleet.nodes.get("cam-1") as NodeRecord, fleet.lastSeen("cam-1"))?.spec,
    ).toMatchObject({
      renewTime: new Date(100_000).toISOString().replace("Z", "000Z"),
    });
    now = 200_000;
    fleet.applyStoredNode({ ...record(false), lastSeen: 4_000 });
    expect(seen()).toBe(new Date(4_000).toISOString().replace(/\.\d+Z$/, "Z"));
    expect(fleet.lastSeen("cam-1")).toBe(4_000);
  });
});
