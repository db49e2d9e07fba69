import { describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { type Change, Fleet } from "../../../src/hub/fleet.ts";
import { Flusher } from "../../../src/hub/flusher.ts";
import { Identity } from "../../../src/hub/identity.ts";
import { SqliteHubStore } from "../../../src/hub/store-sqlite.ts";
import { HUB_ANNOTATIONS, PROTOCOL_VERSION } from "../../../src/protocol/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { makePod } from "../../lib/builders.ts";
import { settle } from "../../lib/hub-updates.ts";

async function setup(store = new SqliteHubStore(":memory:"), clock = new FakeClock()) {
  const changes: Change[] = [];
  const dropped: string[] = [];
  let queued = 0;
  const loaded = await store.load();
  const fleet = new Fleet(
    {
      store,
      maxEventsPerNode: 2,
      offlineAfterMs: 30_000,
      onChange: (c) => changes.push(c),
      onEventDropped: (e) => dropped.push(`events ${e.metadata.name} ${e.source.host}`),
      onQueued: () => queued++,
      now: () => clock.now(),
    },
    loaded,
  );
  const identity = new Identity({ store, nodes: fleet.nodes }, loaded);
  return { store, fleet, identity, changes, dropped, queued: () => queued };
}

const hello = (streamId = "s1") => ({
  type: "hello" as const,
  protocolVersion: PROTOCOL_VERSION,
  nodeName: "cam-1",
  agentVersion: "0.1.0",
  streamId,
});

async function joined(clock: FakeClock, store?: SqliteHubStore) {
  const s = await setup(store, clock);
  const tok = await s.identity.createJoinToken(60_000, { site: "a" }, clock.now());
  const { credential } = await s.identity.join(
    { joinToken: tok.token, nodeName: "cam-1" },
    clock.now(),
  );
  return { ...s, credential, joinToken: tok.token };
}

const pod = (name: string, nodeName = "cam-1") =>
  makePod({ name, spec: { nodeName }, status: { phase: "Running" } });

describe("Fleet", () => {
  test("a node going offline is stored within the flush interval, with no report to carry it", async () => {
    const clock = new FakeClock();
    const { store, fleet, queued } = await joined(clock);
    const flusher = new Flusher({
      ...{ fleet, store, clock, log: nullLogger, intervalMs: 50 },
      ack: () => {},
    });
    fleet.connect("cam-1", hello(), clock.now());
    await flusher.flush();
    const before = queued();
    const at = clock.now();
    fleet.setOffline("cam-1", at);
    expect(queued()).toBe(before + 1);
    flusher.soon();
    flusher.soon(); // one flush for both
    clock.step(49);
    await settle();
    expect((await store.load()).nodes[0]?.online).toBe(true);
    clock.step(1);
    await settle();
    expect((await store.load()).nodes[0]).toMatchObject({ online: false, offlineSince: at });
  });

  test("checkLiveness() marks a node offline after the silence limit, and a message brings it back", async () => {
    const clock = new FakeClock();
    const { fleet } = await joined(clock);
    fleet.connect("cam-1", hello(), clock.now());
    clock.step(30_000);
    expect(fleet.checkLiveness(clock.now())).toEqual([]);
    clock.step(1);
    expect(fleet.checkLiveness(clock.now())).toEqual(["cam-1"]);
    const view = fleet.view("cam-1");
    expect(view?.metadata.annotations?.[HUB_ANNOTATIONS.online]).toBe("false");
    fleet.touch("cam-1", clock.now());
    expect(fleet.isOnline("cam-1")).toBe(true);
  });

  test("an offline node that reported Ready shows Ready Unknown with reason NodeStatusUnknown", async () => {
    const clock = new FakeClock();
    const { fleet } = await joined(clock);
    fleet.connect("cam-1", hello(), clock.now());
    const node = {
      apiVersion: "v1" as const,
      kind: "Node" as const,
      metadata: { name: "cam-1" },
      spec: {},
      status: { conditions: [{ type: "Ready" as const, status: "True" as const }] },
    };
    expect(fleet.ingest("cam-1", { type: "node", seq: 1, node }).ok).toBe(true);
    fleet.setOffline("cam-1", clock.now());
    const ready = fleet.view("cam-1")?.status.conditions?.find((c) => c.type === "Ready");
    expect(ready).toMatchObject({ status: "Unknown", reason: "NodeStatusUnknown" });
  });

  test("ingest() refuses a pod or event of another node and ignores a repeated seq", async () => {
    const clock = new FakeClock();
    const { fleet, changes } = await joined(clock);
    fleet.connect("cam-1", hello(), clock.now());
    const other = pod("x", "cam-2");
    const r = fleet.ingest("cam-1", {
      type: "pod.upsert",
      seq: 1,
      uid: other.metadata.uid ?? "",
      pod: other,
    });
    expect(r).toEqual({ ok: false, reason: 'node "cam-1" cannot report pod "x" of node "cam-2"' });
    const mine = pod("web");
    const uid = mine.metadata.uid ?? "";
    expect(fleet.ingest("cam-1", { type: "pod.upsert", seq: 2, uid, pod: mine }).ok).toBe(true);
    changes.length = 0;
    expect(fleet.ingest("cam-1", { type: "pod.delete", seq: 2, uid }).ok).toBe(true);
    expect(changes).toEqual([]);
    expect(fleet.podsOf("cam-1").size).toBe(1);
  });

  test("a pod reported without a creationTimestamp gets the hub's time of its first report, kept on updates", async () => {
    const clock = new FakeClock(Date.parse("2026-03-01T10:00:00.700Z"));
    const { fleet, changes } = await joined(clock);
    fleet.connect("cam-1", hello(), clock.now());
    const { creationTimestamp: _, ...meta } = pod("web").metadata;
    const p = { ...pod("web"), metadata: meta };
    const uid = p.metadata.uid ?? "";
    fleet.ingest("cam-1", { type: "pod.upsert", seq: 1, uid, pod: p });
    clock.step(65_000);
    fleet.ingest("cam-1", { type: "pod.upsert", seq: 2, uid, pod: p });
    const served = changes.filter((c) => c.kind === "pods").map((c) => c.object.metadata);
    expect(served.map((m) => m.creationTimestamp)).toEqual([
      "2026-03-01T10:00:00Z",
      "2026-03-01T10:00:00Z",
    ]);
    const own = pod("db");
    fleet.ingest("cam-1", { type: "pod.upsert", seq: 3, uid: "uid-db", pod: own });
    expect(fleet.podsOf("cam-1").get("uid-db")?.metadata.creationTimestamp).toBe(
      own.metadata.creationTimestamp,
    );
  });

  test("a hello with a new stream id forgets the node's pods and starts its seqs at 0", async () => {
    const clock = new FakeClock();
    const { fleet } = await joined(clock);
    fleet.connect("cam-1", hello("s1"), clock.now());
    const p = pod("web");
    fleet.ingest("cam-1", { type: "pod.upsert", seq: 5, uid: p.metadata.uid ?? "", pod: p });
    fleet.stored("cam-1", fleet.markReceived("cam-1"));
    expect(fleet.connect("cam-1", hello("s1"), clock.now())).toBe(5);
    expect(fleet.connect("cam-1", hello("s2"), clock.now())).toBe(0);
    expect(fleet.podsOf("cam-1").size).toBe(0);
  });

  test("markReceived() queues the node's progress as seq-only; another change of its progress clears the mark", async () => {
    const clock = new FakeClock();
    const store = new SqliteHubStore(":memory:");
    const marks: [number, boolean][] = [];
    const queue = store.queueProgress.bind(store);
    store.queueProgress = (progress, seqOnly) => {
      marks.push([progress.ackedSeq, seqOnly === true]);
      queue(progress, seqOnly);
    };
    const { fleet } = await joined(clock, store);
    fleet.connect("cam-1", hello(), clock.now());
    const p = pod("web");
    fleet.ingest("cam-1", { type: "pod.upsert", seq: 1, uid: p.metadata.uid ?? "", pod: p });
    marks.length = 0;
    fleet.markReceived("cam-1");
    fleet.setDesiredAck("cam-1", { generation: 1 });
    expect(marks).toEqual([
      [1, true],
      [0, false],
    ]);
  });

  test("keeps only the most recent events of a node; one pushed out is told as dropped", async () => {
    const clock = new FakeClock();
    const { fleet, dropped, changes } = await joined(clock);
    for (const [i, name] of ["a", "b", "c"].entries()) {
      const event = {
        apiVersion: "v1" as const,
        kind: "Event" as const,
        metadata: { name, namespace: "default" },
        involvedObject: {},
        reason: "Pulled",
        message: name,
        type: "Normal" as const,
        source: {},
        count: 1,
        firstTimestamp: "2026-01-01T00:00:00Z",
        lastTimestamp: "2026-01-01T00:00:00Z",
      };
      fleet.ingest("cam-1", { type: "event", seq: i + 1, event });
    }
    expect([...fleet.eventsOf("cam-1").keys()]).toEqual(["b", "c"]);
    expect(dropped).toEqual(["events a cam-1"]);
    expect(changes.filter((c) => c.kind === "events" && c.type === "DELETED")).toEqual([]);
  });
});

describe("HubStore", () => {
  /** cam-1 joined and connected on a store file, its pod "web" stored; remove() deletes the file. */
  async function onFile(clock: FakeClock, tag: string) {
    const path = `${process.env.TMPDIR ?? "/tmp"}/hub-store-${tag}-${process.pid}-${Date.now()}.db`;
    const a = await joined(clock, new SqliteHubStore(path));
    a.fleet.connect("cam-1", hello(), clock.now());
    const p = pod("web");
    a.fleet.ingest("cam-1", { type: "pod.upsert", seq: 1, uid: p.metadata.uid ?? "", pod: p });
    a.fleet.stored("cam-1", a.fleet.markReceived("cam-1"));
    const remove = () => {
      for (const suffix of ["", "-wal", "-shm"]) rmSync(path + suffix, { force: true });
    };
    return { ...a, path, p, remove };
  }

  test("what was flushed is loaded again by a new store on the same file", async () => {
    const clock = new FakeClock();
    const { path, p, remove, ...a } = await onFile(clock, "reload");
    await a.store.close();
    const b = await setup(new SqliteHubStore(path));
    expect(b.fleet.nodes.get("cam-1")).toMatchObject({
      ackedSeq: 1,
      streamId: "s1",
      connected: true,
    });
    expect(b.fleet.podsOf("cam-1").get(p.metadata.uid ?? "")).toEqual(p);
    expect(b.identity.authenticate(a.credential, clock.now())).toEqual({
      ok: true,
      nodeName: "cam-1",
    });
    await b.store.close();
    remove();
  });

  test("a forgotten node stays forgotten, also with writes of it still queued", async () => {
    const clock = new FakeClock();
    const { path, remove, ...a } = await onFile(clock, "forget");
    a.store.flush();
    const q = pod("db");
    a.fleet.ingest("cam-1", { type: "pod.upsert", seq: 2, uid: "uid-db", pod: q });
    a.fleet.markReceived("cam-1");
    expect(a.store.pending()).toBeGreaterThan(0);
    expect(() => a.identity.releaseRevoked("cam-1")).toThrow(
      'node "cam-1" is not revoked; revoke it first',
    );
    await a.identity.revokeNode("cam-1", clock.now());
    a.changes.length = 0;
    a.identity.releaseRevoked("cam-1");
    expect((await a.fleet.forget("cam-1"))?.metadata.name).toBe("cam-1");
    expect(a.changes.map((c) => `${c.type} ${c.kind} ${c.object.metadata.name}`)).toEqual([
      "DELETED pods web",
      "DELETED pods db",
      "DELETED nodes cam-1",
    ]);
    expect(a.store.pending()).toBe(0);
    expect(a.identity.authenticate(a.credential)).toMatchObject({
      ok: false,
      code: "unauthorized",
    });
    await a.store.close();
    const b = await setup(new SqliteHubStore(path));
    expect(b.fleet.nodes.size).toBe(0);
    expect(b.fleet.allPods()).toEqual([]);
    const tok = await b.identity.createJoinToken(60_000, {}, clock.now());
    expect(
      (await b.identity.join({ joinToken: tok.token, nodeName: "cam-1" }, clock.now())).nodeName,
    ).toBe("cam-1");
    await b.store.close();
    remove();
  });
});

describe("Identity", () => {
  test("join() refuses unknown, expired and revoked join tokens with clear reasons", async () => {
    const clock = new FakeClock();
    const { identity } = await setup();
    const tok = await identity.createJoinToken(1000, {}, clock.now());
    await expect(
      identity.join({ joinToken: "flj_nope", nodeName: "a" }, clock.now()),
    ).rejects.toThrow("unknown join token");
    clock.step(1000);
    await expect(
      identity.join({ joinToken: tok.token, nodeName: "a" }, clock.now()),
    ).rejects.toThrow("join token expired at");
    const tok2 = await identity.createJoinToken(1000, {}, clock.now());
    await identity.revokeJoinToken(tok2.id);
    await expect(
      identity.join({ joinToken: tok2.token, nodeName: "a" }, clock.now()),
    ).rejects.toThrow("join token revoked");
  });

  test("a revoked node's credential is refused and its name cannot join again (until forgotten)", async () => {
    const clock = new FakeClock();
    const { identity, credential, joinToken } = await joined(clock);
    await identity.revokeNode("cam-1", clock.now());
    expect(identity.authenticate(credential)).toEqual({
      ok: false,
      code: "revoked",
      reason: 'node "cam-1" was revoked',
    });
    await expect(identity.join({ joinToken, nodeName: "cam-1" }, clock.now())).rejects.toThrow(
      'node "cam-1" was revoked',
    );
  });

  test("the hub keeps only hashes of tokens", async () => {
    const clock = new FakeClock();
    const { store, credential, joinToken } = await joined(clock);
    const dump = JSON.stringify(await store.load());
    expect(dump).not.toContain(credential);
    expect(dump).not.toContain(joinToken);
  });
});
