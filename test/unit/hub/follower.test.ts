import { describe, expect, test } from "bun:test";
import type { Event } from "../../../src/api/types.ts";
import { type BusMessage, createLocalBus } from "../../../src/hub/bus.ts";
import type { Change } from "../../../src/hub/fleet.ts";
import { ReplicaFleet } from "../../../src/hub/fleet-replica.ts";
import { loadedKeys, type ObjectRow, ViewApplier } from "../../../src/hub/follow-view.ts";
import { ChangeFollower, type FollowerDeps } from "../../../src/hub/follower.ts";
import { ChangeLog, type KubeChange } from "../../../src/hub/kube/changes.ts";
import type { KubeObject } from "../../../src/hub/kube/resources.ts";
import { ChangeFeed, type LoggedChange } from "../../../src/hub/pg/changes.ts";
import type { NodeRecord } from "../../../src/hub/store.ts";
import { SqliteHubStore } from "../../../src/hub/store-sqlite.ts";
import { eventView } from "../../../src/hub/views.ts";
import { HUB_ANNOTATIONS } from "../../../src/protocol/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { createLogger } from "../../../src/util/log.ts";
import { makePod } from "../../lib/builders.ts";
import { until } from "../../lib/until.ts";

const quiet = createLogger({ level: "error" });
const row = (rv: number, own = false): LoggedChange => ({
  rv,
  kind: "ConfigMap",
  key: `default/c${rv}`,
  deleted: false,
  object: "{}",
  own,
});

/** A follower over a log held in an array; `reads` counts reads, `gate` holds them. */
function follower(log: LoggedChange[], limit = 100, readGapMs = 0) {
  const clock = new FakeClock();
  const bus = createLocalBus();
  const feed = new ChangeFeed();
  const applied: number[] = [];
  const published: BusMessage[] = [];
  bus.subscribe("changes", (m) => published.push(m));
  let reads = 0;
  let gate: Promise<void> = Promise.resolve();
  /** The trim's floor the reads give, and what reload() loads (the rv it gives). */
  const trim = { floor: 0, loadedRv: 0, reloads: 0, failReload: false };
  const floors: number[] = [];
  const deps: FollowerDeps = {
    read: async (after) => {
      reads++;
      await gate;
      const rows = log.filter((r) => r.rv > after && r.rv > trim.floor).slice(0, limit);
      return { rows, floor: trim.floor };
    },
    apply: (rows) => applied.push(...rows.map((r) => r.rv)),
    reload: async () => {
      trim.reloads++;
      if (trim.failReload) throw new Error("connection refused");
      return trim.loadedRv;
    },
    trimmed: (floor) => floors.push(floor),
    trim: async () => 0,
    bus,
    feed,
    clock,
    log: quiet,
    pollMs: 2000,
    readGapMs,
    trimEveryMs: 60_000,
    limit,
  };
  const f = new ChangeFollower(deps, 0);
  return {
    f,
    clock,
    bus,
    feed,
    applied,
    published,
    trim,
    floors,
    reads: () => reads,
    hold(): () => void {
      let open = () => {};
      gate = new Promise((r) => {
        open = r;
      });
      return open;
    },
  };
}

describe("ChangeFollower", () => {
  test("catchUp() applies the rows past what it applied, in order, reading again while a read gives the limit", async () => {
    const log = [1, 2, 3, 4, 5].map((rv) => row(rv));
    const t = follower(log, 2);
    await t.f.catchUp();
    expect(t.applied).toEqual([1, 2, 3, 4, 5]);
    expect(t.f.rv).toBe(5);
    log.push(row(7));
    await t.f.catchUp();
    expect(t.applied).toEqual([1, 2, 3, 4, 5, 7]);
  });

  test("catchUp() behind the trim loads the view again, then follows on from the rv it loaded; a failed load is tried again", async () => {
    const log = [1, 2, 3, 4, 5, 6, 7, 8].map((rv) => row(rv));
    const t = follower(log);
    t.trim.floor = 4; // rows 1 to 4 were trimmed before this replica read any
    t.trim.loadedRv = 6; // the store's state as of row 6
    t.trim.failReload = true;
    await t.f.catchUp();
    expect(t.trim.reloads).toBe(1);
    expect(t.applied).toEqual([]);
    expect(t.f.rv).toBe(0);
    t.trim.failReload = false;
    await t.f.catchUp();
    expect(t.trim.reloads).toBe(2);
    expect(t.applied).toEqual([7, 8]);
    expect(t.f.rv).toBe(8);
    expect(t.floors.every((f) => f === 4)).toBe(true);
    // Caught up past the floor: no more loads.
    log.push(row(9));
    await t.f.catchUp();
    expect(t.trim.reloads).toBe(2);
    expect(t.applied).toEqual([7, 8, 9]);
  });

  test("pokes that come while a read runs are answered by one more read", async () => {
    const log = [row(1)];
    const t = follower(log);
    const open = t.hold();
    const first = t.f.poke();
    for (let i = 0; i < 5; i++) void t.f.poke();
    log.push(row(2));
    open();
    await first;
    expect(t.reads()).toBe(2);
    expect(t.applied).toEqual([1, 2]);
  });

  test("a read starts at least readGapMs after the one before, however many pokes come; stop() ends the wait without a read", async () => {
    const log = [row(1)];
    const t = follower(log, 100, 50);
    await t.f.poke();
    expect(t.reads()).toBe(1);
    log.push(row(2));
    const second = t.f.poke();
    for (let i = 0; i < 5; i++) void t.f.poke();
    await Bun.sleep(0);
    expect(t.reads()).toBe(1);
    t.clock.step(49);
    await Bun.sleep(0);
    expect(t.reads()).toBe(1);
    t.clock.step(1);
    await second;
    expect(t.reads()).toBe(2);
    expect(t.applied).toEqual([1, 2]);
    t.clock.step(50);
    await t.f.poke();
    expect(t.reads()).toBe(3);
    const waiting = t.f.poke();
    t.f.stop();
    await waiting;
    t.clock.step(100);
    expect(t.reads()).toBe(3);
  });

  test("a commit of its own is published on the bus with its origin; its echo and a poke with an old rv are not read for; a newer rv and the poll are; stop() ends both", async () => {
    const log: LoggedChange[] = [];
    const t = follower(log);
    t.f.start();
    log.push(row(1, true));
    t.feed.committed(1);
    expect(t.published).toEqual([{ type: "changes", rv: 1, origin: t.feed.origin }]);
    await until("the own row applied", () => t.applied.includes(1));
    const before = t.reads();
    t.bus.publish({ type: "changes", rv: 1 });
    t.bus.publish({ type: "changes", rv: 5, origin: t.feed.origin });
    expect(t.reads()).toBe(before);
    log.push(row(2));
    t.bus.publish({ type: "changes", rv: 2 });
    await until("the poked row applied", () => t.applied.includes(2));
    log.push(row(3));
    t.clock.step(2000);
    await until("the polled row applied", () => t.applied.includes(3));
    t.f.stop();
    log.push(row(4));
    t.clock.step(4000);
    t.feed.committed(4);
    expect(t.applied).toEqual([1, 2, 3]);
  });
});

async function replicaView(nodes: NodeRecord[] = []) {
  const store = new SqliteHubStore(":memory:");
  const loaded = { ...(await store.load()), nodes };
  const changes: Change[] = [];
  const kube = new ChangeLog(0);
  const fleet = new ReplicaFleet(
    {
      store,
      maxEventsPerNode: 10,
      offlineAfterMs: 3000,
      onChange: (c) => changes.push(c),
      onEventDropped: (event) => kube.forget("events", event as KubeObject),
      now: () => 0,
      storedOnline: true,
    },
    loaded,
  );
  const recorded: KubeChange[] = [];
  kube.subscribe((c) => recorded.push(c));
  const objects: ObjectRow[] = [];
  const credentials: [string | undefined, string | undefined][] = [];
  const view = new ViewApplier(
    {
      fleet,
      identity: {
        nodeStored: (old, rec) => credentials.push([old?.credentialHash, rec?.credentialHash]),
      },
      changes: kube,
      object: (r) => objects.push(r),
      log: quiet,
    },
    loadedKeys(loaded),
  );
  return { store, fleet, changes, kube, recorded, objects, credentials, view };
}

const record = (name: string, online: boolean, hash = "h1"): NodeRecord => ({
  name,
  credentialHash: hash,
  hubLabels: {},
  joinedAt: 0,
  ackedSeq: 3,
  connected: true,
  desiredGeneration: 0,
  ackedGeneration: 0,
  online,
});

const nodeRow = (rv: number, rec: NodeRecord, own = false): LoggedChange => ({
  rv,
  kind: "nodes",
  key: rec.name,
  deleted: false,
  object: JSON.stringify({ progress: rec, node: null }),
  own,
});

/** An event of node cam-1, as its agent reports it. */
const cam1Event = (name: string): Event => ({
  apiVersion: "v1",
  kind: "Event",
  metadata: { name, namespace: "default" },
  involvedObject: { kind: "Pod", name: "web" },
  reason: "Started",
  message: "",
  source: { component: "kubelet", host: "cam-1" },
  type: "Normal",
  count: 1,
  firstTimestamp: "2026-01-01T00:00:00Z",
  lastTimestamp: "2026-01-01T00:00:00Z",
});

describe("ViewApplier", () => {
  test("another replica's rows set the view and tell its watchers; its own rows go only to the Kubernetes log", async () => {
    const v = await replicaView();
    const pod = makePod({ name: "web", uid: "u1", spec: { nodeName: "cam-1" } });
    v.view.apply([
      nodeRow(5, record("cam-1", true)),
      {
        rv: 6,
        kind: "pods",
        key: "cam-1/u1",
        deleted: false,
        object: JSON.stringify(pod),
        own: false,
      },
      {
        rv: 7,
        kind: "pods",
        key: "cam-1/u1",
        deleted: false,
        object: JSON.stringify(pod),
        own: false,
      },
      {
        rv: 8,
        kind: "pods",
        key: "cam-2/u9",
        deleted: false,
        object: JSON.stringify(pod),
        own: true,
      },
      { rv: 9, kind: "ConfigMap", key: "default/a", deleted: false, object: "{}", own: false },
      { rv: 10, kind: "ConfigMap", key: "default/b", deleted: false, object: "{}", own: true },
    ]);
    expect(v.fleet.isOnline("cam-1")).toBe(true);
    expect(v.fleet.podsOf("cam-1").get("u1")?.metadata.name).toBe("web");
    expect(v.fleet.podsOf("cam-2").size).toBe(0);
    expect(v.changes.filter((c) => c.kind === "pods").map((c) => c.type)).toEqual([
      "ADDED",
      "MODIFIED",
    ]);
    expect(v.recorded.map((c) => [c.rv, c.resource, c.type])).toEqual([
      [5, "nodes", "ADDED"],
      [6, "pods", "ADDED"],
      [7, "pods", "MODIFIED"],
      [8, "pods", "ADDED"],
    ]);
    expect(v.recorded[1]?.object.metadata.resourceVersion).toBe("6");
    expect(v.kube.current()).toBe(10);
    expect(v.objects.map((o) => o.key)).toEqual(["default/a"]);
    expect(v.credentials).toEqual([[undefined, "h1"]]);
  });

  test("a node stored online elsewhere is not marked offline here; its stored offline state is shown", async () => {
    const v = await replicaView([record("cam-1", true)]);
    expect(v.fleet.checkLiveness(1_000_000)).toEqual([]);
    expect(v.fleet.view("cam-1")?.metadata.annotations?.[HUB_ANNOTATIONS.online]).toBe("true");
    v.view.apply([nodeRow(2, { ...record("cam-1", false), offlineSince: 500 })]);
    expect(v.fleet.isOnline("cam-1")).toBe(false);
    expect(v.changes.at(-1)?.type).toBe("MODIFIED");
  });

  test("an event trimmed by another replica is dropped without telling watchers; a node's deletion drops it", async () => {
    const event = cam1Event("e1");
    const v = await replicaView([record("cam-1", true)]);
    v.view.apply([
      {
        rv: 2,
        kind: "events",
        key: "cam-1/e1",
        deleted: false,
        object: JSON.stringify(event),
        own: false,
      },
      { rv: 3, kind: "events", key: "cam-1/e1", deleted: true, object: null, own: false },
    ]);
    expect(v.fleet.eventsOf("cam-1").size).toBe(0);
    expect(v.changes.map((c) => `${c.kind} ${c.type}`)).toEqual(["events ADDED"]);
    expect(v.recorded.map((c) => c.type)).toEqual(["ADDED"]);
    // Its version is forgotten (the log would otherwise keep one for every event ever trimmed).
    const served = eventView("cam-1", event) as KubeObject;
    expect(v.kube.withVersion("events", served).metadata.resourceVersion).toBe("0");
    v.view.apply([{ ...nodeRow(4, record("cam-1", true)), deleted: true }]);
    expect(v.fleet.nodes.has("cam-1")).toBe(false);
    expect(v.recorded.at(-1)?.type).toBe("DELETED");
    expect(v.credentials.at(-1)).toEqual(["h1", undefined]);
  });

  test("an own event read back after its node's later events pushed it out keeps no version", async () => {
    const v = await replicaView([record("cam-1", true)]);
    const own = (rv: number, name: string): LoggedChange => ({
      rv,
      kind: "events",
      key: `cam-1/${name}`,
      deleted: false,
      object: JSON.stringify(cam1Event(name)),
      own: true,
    });
    // e1 is held by this replica's fleet, e0 no longer (pushed out before its row was read).
    v.fleet.applyStoredEvent("cam-1", "e1", cam1Event("e1"), true);
    v.view.apply([own(2, "e0"), own(3, "e1")]);
    expect(v.recorded.map((c) => [c.rv, c.type])).toEqual([
      [2, "ADDED"],
      [3, "ADDED"],
    ]);
    const version = (name: string) =>
      v.kube.withVersion("events", eventView("cam-1", cam1Event(name)) as KubeObject).metadata
        .resourceVersion;
    expect(version("e0")).toBe("0");
    expect(version("e1")).toBe("3");
  });
});

describe("ViewApplier.reload (a replica behind the log's trim)", () => {
  test("takes the view from what was loaded: nodes, pods and credentials as stored, others dropped; Kubernetes watches end as gone", async () => {
    const v = await replicaView([record("cam-1", false), record("gone-1", false)]);
    const pod = (uid: string, image: string) =>
      makePod({ name: uid, uid, spec: { nodeName: "cam-1", containers: [{ name: "c", image }] } });
    const podRow = (rv: number, uid: string): LoggedChange => ({
      ...{ rv, kind: "pods", key: `cam-1/${uid}`, deleted: false },
      ...{ object: JSON.stringify(pod(uid, "v1")), own: false },
    });
    v.view.apply([podRow(2, "u1"), podRow(3, "u2")]);
    const ended: string[] = [];
    v.kube.subscribe(
      () => {},
      () => ended.push("gone"),
    );
    v.view.reload({
      changesRv: 20,
      joinTokens: [],
      nodes: [record("cam-1", false, "h2"), record("new-1", false)],
      pods: [
        { node: "cam-1", pod: pod("u2", "v2") },
        {
          node: "new-1",
          pod: { ...pod("u3", "v1"), spec: { ...pod("u3", "v1").spec, nodeName: "new-1" } },
        },
      ],
      events: [],
    });
    expect([...v.fleet.nodes.keys()].sort()).toEqual(["cam-1", "new-1"]);
    expect([...v.fleet.podsOf("cam-1").keys()]).toEqual(["u2"]);
    expect(v.fleet.podsOf("cam-1").get("u2")?.spec.containers[0]?.image).toBe("v2");
    expect([...v.fleet.podsOf("new-1").keys()]).toEqual(["u3"]);
    expect(v.credentials).toContainEqual(["h1", undefined]);
    expect(v.credentials).toContainEqual(["h1", "h2"]);
    const told = v.changes.map((c) => [c.type, c.kind, c.object.metadata?.name]);
    expect(told).toContainEqual(["DELETED", "pods", "u1"]);
    expect(told).toContainEqual(["DELETED", "nodes", "gone-1"]);
    expect(ended).toEqual(["gone"]);
    expect(v.kube.current()).toBe(20);
    expect(v.kube.since(3)).toBe("gone");
    expect(v.kube.since(20)).toEqual([]);
    // Rows after it are recorded as before, ADDED or MODIFIED by what was loaded.
    const after: KubeChange[] = [];
    v.kube.subscribe((c) => after.push(c));
    v.view.apply([podRow(21, "u2")]);
    expect(after.map((c) => [c.rv, c.type])).toEqual([[21, "MODIFIED"]]);
  });
});

describe("ChangeLog numbered by a shared log", () => {
  test("recordAt() keeps the log's numbers; since() gives what is after a number, and 410 below the trim", () => {
    const log = new ChangeLog(10);
    const pod = makePod({ name: "web", uid: "u1" });
    log.recordAt(12, "pods", "ADDED", pod);
    log.advance(15);
    log.recordAt(17, "pods", "MODIFIED", pod);
    expect(log.current()).toBe(17);
    expect(log.withVersion("pods", pod).metadata.resourceVersion).toBe("17");
    const after = log.since(12);
    expect(after === "gone" ? after : after.map((c) => c.rv)).toEqual([17]);
    expect(log.since(9)).toBe("gone");
    log.trimmed(14);
    expect(log.since(13)).toBe("gone");
    expect(log.since(14)).not.toBe("gone");
  });
});
