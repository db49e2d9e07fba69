// Node updates and agent rollouts as hub replicas share them (src/hub/updates/shared.ts,
// src/hub/follow-updates.ts, the rollouts' store change): a wish or a rollout another replica
// stored is taken unless this replica wrote a newer one; what the holder of an agent hears of its
// update (status, first offer, hello of a node in an update) is shared and taken; the leader's
// pass writes nothing over a change another replica stored meanwhile (a pause) and moves no
// member then. The store is SQLite in memory, with the change log's numbers played by a counter.
import { describe, expect, test } from "bun:test";
import { followUpdates } from "../../../src/hub/follow-updates.ts";
import { type AgentRollout, freshRecord, parseSpec } from "../../../src/hub/rollouts/spec.ts";
import { ROLLOUT_KIND, rolloutText } from "../../../src/hub/rollouts/store.ts";
import { openHubDatabase } from "../../../src/hub/store-sqlite.ts";
import { REPORT_KIND, reportRow, WISH_KIND, wishRow } from "../../../src/hub/updates/shared.ts";
import type { SharedReport } from "../../../src/hub/updates/store.ts";
import { SqliteUpdateStore } from "../../../src/hub/updates/store-sqlite.ts";
import { NodeUpdates } from "../../../src/hub/updates/updates.ts";
import { AGENT_FEATURES } from "../../../src/protocol/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { rolloutWorld } from "../../lib/agent-rollouts.ts";
import { FakeReleases } from "../../lib/hub-updates.ts";
import { saveRollout } from "../../lib/rollout-store-contract.ts";

/** Node updates over a store whose writes are numbered from `rv` up (as the change log's), with
 * what it shared recorded. */
function sharedUpdates(firstRv = 10) {
  const clock = new FakeClock(Date.UTC(2026, 5, 1, 12));
  const sqlite = new SqliteUpdateStore(openHubDatabase(":memory:"));
  let rv = firstRv;
  const shared: [string, SharedReport][] = [];
  const notes: string[] = [];
  const releases = new FakeReleases();
  releases.add("0.2.0", "arm64");
  const updates = new NodeUpdates(
    {
      store: {
        load: () => sqlite.load(),
        write: async (c) => {
          await sqlite.write(c);
          return rv++;
        },
        share: async (node, r) => {
          shared.push([node, r]);
          return rv++;
        },
      },
      releases,
      node: () => ({ arch: "arm64", version: "0.1.0" }),
      now: () => clock.now(),
      onReport: (node, text) => notes.push(`${node}: ${text}`),
    },
    [],
  );
  return { updates, shared, notes, clock };
}

const settle = () => Bun.sleep(0);

describe("a node's wish between replicas", () => {
  test("another replica's wish is taken unless this replica wrote a newer one of the node", async () => {
    const { updates } = sharedUpdates(10);
    await updates.setWanted("cam-1", "0.2.0"); // this replica's write: rv 10
    expect(updates.takeWish({ node: "cam-1", version: "0.3.0", setAt: 1 }, 9)).toBe(false);
    expect(updates.wantedFor("cam-1")?.version).toBe("0.2.0");
    expect(updates.takeWish({ node: "cam-1", version: "0.3.0", setAt: 2 }, 11)).toBe(true);
    expect(updates.wantedFor("cam-1")).toEqual({ node: "cam-1", version: "0.3.0", setAt: 2 });
    expect(updates.takeWish({ node: "cam-1", version: null }, 12)).toBe(true);
    expect(updates.wantedFor("cam-1")).toBeUndefined();
    // The same wish again changes nothing: its agent is not offered it again.
    expect(updates.takeWish({ node: "cam-2", version: "0.2.0", setAt: 3 }, 13)).toBe(true);
    expect(updates.takeWish({ node: "cam-2", version: "0.2.0", setAt: 3 }, 14)).toBe(false);
  });

  test("a wish's row reads back as the wish it was written from", () => {
    const { updates } = sharedUpdates();
    const follow = followUpdates(updates, () => undefined, { updateChanged: () => {} });
    const put = wishRow({ node: "cam-1", version: "0.2.0", setAt: 5 });
    expect(follow.take({ ...put, rv: 3 })).toBe(true);
    expect(updates.wantedFor("cam-1")).toEqual({ node: "cam-1", version: "0.2.0", setAt: 5 });
    const gone = wishRow({ node: "cam-1", version: null });
    expect(gone).toMatchObject({ kind: WISH_KIND, deleted: true, object: null });
    follow.take({ ...gone, rv: 4 });
    expect(updates.wantedFor("cam-1")).toBeUndefined();
  });
});

describe("what the holder of an agent hears of its update", () => {
  test("is shared: its status, the first offer of a version, the hello of a node in an update", async () => {
    const { updates, shared, clock } = sharedUpdates();
    const at = clock.now();
    updates.hello("cam-2", "0.1.0", [AGENT_FEATURES.updates]); // in no update: not shared
    await updates.setWanted("cam-1", "0.2.0");
    updates.hello("cam-1", "0.1.0", [AGENT_FEATURES.updates]);
    expect((await updates.offer("cam-1"))?.version).toBe("0.2.0");
    updates.hello("cam-1", "0.1.0", [AGENT_FEATURES.updates]);
    await updates.offer("cam-1"); // offered again after a new hello: not a first offer
    const status = { type: "update.status", version: "0.2.0", phase: "downloading" } as const;
    updates.report("cam-1", status);
    await settle();
    expect(shared).toEqual([
      ["cam-1", { agent: { version: "0.1.0", updates: true } }],
      ["cam-1", { offered: "0.2.0", at }],
      ["cam-1", { agent: { version: "0.1.0", updates: true } }],
      ["cam-1", { status, at }],
    ]);
  });

  test("is taken at another replica, through its row, unless this replica shared a newer one", async () => {
    const { updates, notes } = sharedUpdates(100);
    const changed: string[] = [];
    const follow = followUpdates(updates, () => undefined, {
      updateChanged: (n) => changed.push(n),
    });
    const status = { type: "update.status", version: "0.2.0", phase: "healthy" } as const;
    follow.take({ ...reportRow("cam-1", { status, at: 7 }), rv: 1 });
    follow.take({ ...reportRow("cam-1", { offered: "0.2.0", at: 5 }), rv: 2 });
    follow.take({ ...reportRow("cam-1", { agent: { version: "0.2.0", updates: true } }), rv: 3 });
    expect(updates.lastStatus("cam-1")).toEqual(status);
    expect(updates.offeredAt("cam-1", "0.2.0")).toBe(5);
    expect(updates.running("cam-1")).toBe("0.2.0");
    expect(notes).toEqual(["cam-1: healthy 0.2.0"]);
    // This replica hears the agent itself (rv 100): an older row of another is passed over.
    updates.report("cam-1", { type: "update.status", version: "0.2.0", phase: "failed" });
    await settle();
    follow.take({ ...reportRow("cam-1", { status, at: 8 }), rv: 99 });
    expect(updates.lastStatus("cam-1")?.phase).toBe("failed");
    expect(changed).toEqual([]);
  });

  test("a replica that starts loads what was shared before (a rollout's leader to be needs it)", () => {
    const status = { type: "update.status", version: "0.2.0", phase: "failed" } as const;
    const notes: string[] = [];
    const updates = new NodeUpdates(
      {
        store: { load: async () => [], write: async () => undefined },
        releases: new FakeReleases(),
        node: () => ({ arch: "arm64", version: "0.1.0" }),
        now: () => 0,
        onReport: (node, text) => notes.push(`${node}: ${text}`),
      },
      [],
      [
        {
          node: "cam-1",
          status: { status, at: 7 },
          offered: { version: "0.2.0", at: 5 },
          agent: { version: "0.1.5", updates: true },
        },
        { node: "cam-2", offered: { version: "0.2.0", at: 6 } },
      ],
    );
    expect(updates.lastStatus("cam-1")).toEqual(status);
    expect(updates.offeredAt("cam-1", "0.2.0")).toBe(5);
    expect(updates.offeredAt("cam-2", "0.2.0")).toBe(6);
    expect(updates.running("cam-1")).toBe("0.1.5");
    expect(updates.lastStatus("cam-2")).toBeUndefined();
    expect(notes).toEqual(["cam-1: failed 0.2.0"]);
  });

  test("a row that is not a report is refused with what it held", () => {
    const { updates } = sharedUpdates();
    const follow = followUpdates(updates, () => undefined, { updateChanged: () => {} });
    const bad = { kind: REPORT_KIND, key: "cam-1", deleted: false, rv: 1 };
    expect(() => follow.take({ ...bad, object: '{"status":{"phase":"nope"},"at":1}' })).toThrow();
    expect(() => follow.take({ ...bad, object: '{"other":1}' })).toThrow("not an update report");
    expect(follow.take({ ...bad, kind: "daemonsets", object: "{}" })).toBe(false);
  });
});

describe("agent rollouts between replicas", () => {
  test("the leader's pass moves no member over a pause another replica stored meanwhile, and takes it", async () => {
    const w = await rolloutWorld(["cam-1", "cam-2", "cam-3"]);
    await w.put("prod", { version: "0.2.0" });
    expect(w.wishes()).toEqual({ "cam-1": "0.2.0", "cam-2": "-", "cam-3": "-" });
    // Another replica pauses it in the store; this one has not read that row yet.
    const stored = (await w.rolloutStore.load())[0] as AgentRollout;
    const paused = { ...stored, record: { ...stored.record, paused: true } };
    await saveRollout(w.rolloutStore, paused);
    w.report("cam-1", "0.2.0", "healthy");
    await w.rollouts.pass();
    expect(w.wishes()).toEqual({ "cam-1": "0.2.0", "cam-2": "-", "cam-3": "-" });
    expect((await w.rolloutStore.load())[0]).toEqual(paused);
    await w.rollouts.pass();
    expect(w.rollouts.view("prod")).toMatchObject({ phase: "Paused", paused: true });
    expect(w.wishes()["cam-2"]).toBe("-");
  });

  test("a rollout another replica stored is taken, run by this leader, changed and deleted", async () => {
    const w = await rolloutWorld(["cam-1", "cam-2"]);
    const follow = followUpdates(w.updates, () => w.rollouts, { updateChanged: () => {} });
    const r: AgentRollout = {
      name: "edge",
      spec: parseSpec({ version: "0.2.0", selector: "tier=prod" }),
      record: freshRecord(w.clock.now()),
      created: w.clock.now(),
    };
    const row = (x: AgentRollout | null, rv: number) => ({
      kind: ROLLOUT_KIND,
      key: "edge",
      deleted: x === null,
      object: x === null ? null : rolloutText(x),
      rv,
    });
    await saveRollout(w.rolloutStore, r); // as the other replica stored it
    expect(follow.take(row(r, 5))).toBe(true);
    expect(w.rollouts.view("edge").spec.version).toBe("0.2.0");
    await w.rollouts.pass();
    expect(w.wishes()["cam-1"]).toBe("0.2.0");
    const v3 = { ...r, spec: { ...r.spec, version: "0.3.0" }, record: freshRecord(1) };
    follow.take(row(v3, 6));
    expect(w.rollouts.view("edge").spec.version).toBe("0.3.0");
    follow.take(row(null, 7));
    expect(w.rollouts.has("edge")).toBe(false);
    expect(() => follow.take({ ...row(r, 8), object: '{"spec":1}' })).toThrow(
      "not an agent rollout",
    );
  });
});
