// The agent rollout controller (src/hub/rollouts/): members from the selector, the planner fed
// the revisions `version` and "@previous", each moved member's `from` and its way back, the
// phases, the 409s and a restart mid-rollout. Passes are run by hand; time is a FakeClock.
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { rolloutWorld } from "../../lib/agent-rollouts.ts";
import { saveRollout } from "../../lib/rollout-store-contract.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const NODES = ["cam-1", "cam-2", "cam-3", "cam-4"];

describe("members", () => {
  test("are the joined, unrevoked nodes whose labels (the hub's included) match the selector", async () => {
    const w = await rolloutWorld(NODES);
    (w.world.get("cam-2") as { labels: Record<string, string> }).labels = { tier: "lab" };
    (w.world.get("cam-3") as { revoked: boolean }).revoked = true;
    const r = await w.put("prod", { version: "0.2.0", selector: "tier=prod", canary: 0 });
    expect(r.code).toBe(201);
    expect(r.view.nodes.map((n) => n.node)).toEqual(["cam-1", "cam-4"]);
    expect(r.view.counts).toMatchObject({ members: 2 });
    expect(w.rollouts.rolloutOf("cam-1")).toBe("prod");
    expect(w.rollouts.rolloutOf("cam-2")).toBeUndefined();
    expect(w.rollouts.rolloutOf("cam-3")).toBeUndefined();
  });

  test("a hand-set wish of a node the rollout takes is dropped until the rollout moves it", async () => {
    const w = await rolloutWorld(NODES);
    await w.updates.set("cam-4", "0.3.0");
    await w.put("prod", { version: "0.2.0" });
    expect(w.wishes()).toEqual({ "cam-1": "0.2.0", "cam-2": "-", "cam-3": "-", "cam-4": "-" });
  });
});

describe("a rollout step by step", () => {
  test("the canary first, then maxUnavailable at a time, each member's from recorded, Complete", async () => {
    const w = await rolloutWorld(NODES);
    const created = await w.put("prod", { version: "0.2.0", maxUnavailable: 2 });
    expect(created.view.phase).toBe("Canary");
    expect(w.wishes()).toEqual({ "cam-1": "0.2.0", "cam-2": "-", "cam-3": "-", "cam-4": "-" });
    expect(w.changed).toEqual(["cam-1"]);
    const stored = (await w.rolloutStore.load())[0];
    expect(stored?.record.from).toEqual({ "cam-1": "0.1.0" });
    await w.rollouts.pass();
    expect(w.rollouts.view("prod").message).toBe("canary: 0 of 1 updated nodes are healthy");
    expect(w.wishes()["cam-2"]).toBe("-");
    w.report("cam-1", "0.2.0", "healthy");
    await w.rollouts.pass();
    const rolling = w.rollouts.view("prod");
    expect(rolling.phase).toBe("Rolling");
    expect(rolling.message).toBe("3 out of 4 nodes have been updated");
    expect(w.wishes()).toEqual({
      "cam-1": "0.2.0",
      "cam-2": "0.2.0",
      "cam-3": "0.2.0",
      "cam-4": "-",
    });
    w.report("cam-2", "0.2.0", "healthy");
    await w.rollouts.pass();
    expect(w.wishes()["cam-4"]).toBe("0.2.0");
    expect(w.rollouts.view("prod").message).toBe("2 of 4 updated nodes are healthy");
    for (const n of ["cam-3", "cam-4"]) w.report(n, "0.2.0", "healthy");
    await w.rollouts.pass();
    const done = w.rollouts.view("prod");
    expect(done.phase).toBe("Complete");
    expect(done.message).toBe("0.2.0 runs on all 4 online nodes");
    expect(done.counts).toEqual({ members: 4, updated: 4, healthy: 4, unavailable: 0, offline: 0 });
    expect(done.nodes[0]).toEqual({
      node: "cam-1",
      online: true,
      running: "0.2.0",
      from: "0.1.0",
      wanted: "0.2.0",
      phase: "healthy",
    });
  });

  test("a member that goes away while it takes the version holds the canary, unavailable, until it is back on it", async () => {
    const w = await rolloutWorld(NODES);
    await w.put("prod", { version: "0.2.0", maxUnavailable: 2 });
    await w.connect("cam-1");
    // The agent installs the release and restarts: the hub no longer hears it.
    (w.world.get("cam-1") as { online: boolean }).online = false;
    await w.rollouts.pass();
    const waiting = w.rollouts.view("prod");
    expect(waiting.phase).toBe("Canary");
    expect(waiting.counts).toMatchObject({ updated: 1, unavailable: 1, offline: 0 });
    expect(w.wishes()).toEqual({ "cam-1": "0.2.0", "cam-2": "-", "cam-3": "-", "cam-4": "-" });
    (w.world.get("cam-1") as { online: boolean }).online = true;
    w.report("cam-1", "0.2.0", "healthy");
    await w.rollouts.pass();
    expect(w.rollouts.view("prod").phase).toBe("Rolling");
    expect(w.wishes()["cam-2"]).toBe("0.2.0");
  });

  test("a member back on the version but still on trial (no healthy yet) does not pass the canary", async () => {
    const w = await rolloutWorld(NODES);
    await w.put("prod", { version: "0.2.0" });
    await w.connect("cam-1");
    w.report("cam-1", "0.2.0", "restarting");
    (w.world.get("cam-1") as { version: string }).version = "0.2.0";
    await w.connect("cam-1");
    await w.rollouts.pass();
    expect(w.rollouts.view("prod").phase).toBe("Canary");
    expect(w.wishes()["cam-2"]).toBe("-");
    w.report("cam-1", "0.2.0", "healthy");
    await w.rollouts.pass();
    expect(w.rollouts.view("prod").phase).toBe("Rolling");
  });

  test("a member that went away after the offer and stays away fails the progress deadline", async () => {
    const w = await rolloutWorld(["cam-1", "cam-2"]);
    await w.put("prod", { version: "0.2.0", progressDeadlineSeconds: 60 });
    await w.connect("cam-1");
    (w.world.get("cam-1") as { online: boolean }).online = false;
    w.clock.step(61_000);
    await w.rollouts.pass();
    const v = w.rollouts.view("prod");
    expect(v.phase).toBe("Failed");
    expect(v.failed?.message).toBe(
      "its agent did not report 0.2.0 healthy within the progress deadline (60s)",
    );
    expect(w.wishes()["cam-2"]).toBe("-");
  });

  test("an offline member is not moved; the others complete without it", async () => {
    const w = await rolloutWorld(["cam-1", "cam-2"]);
    (w.world.get("cam-2") as { online: boolean }).online = false;
    await w.put("prod", { version: "0.2.0" });
    w.report("cam-1", "0.2.0", "healthy");
    await w.rollouts.pass();
    const v = w.rollouts.view("prod");
    expect(v.phase).toBe("Complete");
    expect(v.message).toBe(
      "0.2.0 runs on all 1 online nodes; 1 offline node(s) will be updated when back",
    );
    expect(w.wishes()["cam-2"]).toBe("-");
  });

  test("with every member offline, a rollout that was complete stays Complete; one that was not is Rolling", async () => {
    const w = await rolloutWorld(["cam-1", "cam-2"]);
    await w.put("done", { version: "0.2.0", selector: "tier=prod" });
    for (const n of ["cam-1", "cam-2"]) {
      w.report(n, "0.2.0", "healthy");
      await w.rollouts.pass();
    }
    expect(w.rollouts.view("done").phase).toBe("Complete");
    for (const n of ["cam-1", "cam-2"]) (w.world.get(n) as { online: boolean }).online = false;
    await w.rollouts.pass();
    expect(w.rollouts.view("done").phase).toBe("Complete");
    const fresh = await rolloutWorld(["cam-1"]);
    (fresh.world.get("cam-1") as { online: boolean }).online = false;
    expect((await fresh.put("new", { version: "0.2.0", canary: 0 })).view.phase).toBe("Rolling");
  });
});

describe("failures", () => {
  test.each([
    ["rolled-back", "its agent was rolled back from 0.2.0 (crashed)"],
    ["refused", "its agent refused 0.2.0 (signature)"],
  ] as const)(
    "a canary that reports %s fails the rollout; no other node is sent the version; the canary gets its from again",
    async (phase, why) => {
      const w = await rolloutWorld(NODES);
      await w.put("prod", { version: "0.2.0" });
      w.report("cam-1", "0.2.0", phase, phase === "refused" ? "signature" : "crashed");
      await w.rollouts.pass();
      await w.rollouts.pass();
      const v = w.rollouts.view("prod");
      expect(v.phase).toBe("Failed");
      expect(v.failed).toEqual({ node: "cam-1", message: why, rolledBack: true });
      expect(v.message).toBe(
        `rollout of 0.2.0 stopped on node cam-1: ${why}; the nodes that got it were sent their previous version again`,
      );
      expect(w.wishes()).toEqual({ "cam-1": "0.1.0", "cam-2": "-", "cam-3": "-", "cam-4": "-" });
    },
  );

  test("with autoRollback off the failing canary keeps its wish, and nothing else moves", async () => {
    const w = await rolloutWorld(NODES);
    await w.put("prod", { version: "0.2.0", autoRollback: false });
    w.report("cam-1", "0.2.0", "rolled-back");
    await w.rollouts.pass();
    expect(w.rollouts.view("prod").message).toEndWith("; automatic rollback is off");
    expect(w.wishes()).toEqual({ "cam-1": "0.2.0", "cam-2": "-", "cam-3": "-", "cam-4": "-" });
  });

  test("a member moved without a known from has its wish dropped on rollback", async () => {
    const w = await rolloutWorld(["cam-1"]);
    await w.put("prod", { version: "0.2.0" });
    const stored = w.rolloutStore;
    const r = (await stored.load())[0];
    expect(r?.record.from).toEqual({ "cam-1": "0.1.0" });
    // A rollout recorded before the node reported its version.
    if (r !== undefined)
      await saveRollout(stored, { ...r, record: { ...r.record, from: { "cam-1": null } } });
    await w.reopen();
    w.report("cam-1", "0.2.0", "refused");
    await w.rollouts.pass();
    expect(w.wishes()["cam-1"]).toBe("-");
  });

  test("the progress deadline fails an online member offered the version that is not healthy in time", async () => {
    const w = await rolloutWorld(["cam-1", "cam-2"]);
    await w.put("prod", { version: "0.2.0", progressDeadlineSeconds: 60 });
    expect((await w.connect("cam-1"))?.version).toBe("0.2.0");
    w.clock.step(59_000);
    await w.rollouts.pass();
    expect(w.rollouts.view("prod").phase).toBe("Canary");
    w.clock.step(2000);
    await w.rollouts.pass();
    expect(w.rollouts.view("prod").failed?.message).toBe(
      "its agent did not report 0.2.0 healthy within the progress deadline (60s)",
    );
    expect(w.wishes()).toEqual({ "cam-1": "0.1.0", "cam-2": "-" });
  });

  test("a new version starts over: the failure cleared, from recorded anew", async () => {
    const w = await rolloutWorld(["cam-1", "cam-2"]);
    await w.put("prod", { version: "0.2.0" });
    w.report("cam-1", "0.2.0", "rolled-back");
    await w.rollouts.pass();
    expect(w.rollouts.view("prod").phase).toBe("Failed");
    const again = await w.put("prod", { version: "0.3.0" });
    expect(again.code).toBe(200);
    expect(again.view.phase).toBe("Canary");
    expect(again.view.failed).toBeUndefined();
    expect((await w.rolloutStore.load())[0]?.record.from).toEqual({ "cam-1": "0.1.0" });
    expect(w.wishes()).toEqual({ "cam-1": "0.3.0", "cam-2": "-" });
  });
});

describe("pause, resume, undo", () => {
  test("a paused rollout moves nothing; resumed, it goes on; undo sends every moved member its from", async () => {
    const w = await rolloutWorld(NODES);
    await w.put("prod", { version: "0.2.0" });
    expect((await w.rollouts.act("prod", "pause")).phase).toBe("Paused");
    w.report("cam-1", "0.2.0", "healthy");
    await w.rollouts.pass();
    expect(w.rollouts.view("prod")).toMatchObject({ phase: "Paused", paused: true });
    expect(w.wishes()["cam-2"]).toBe("-");
    expect((await w.rollouts.act("prod", "resume")).phase).toBe("Rolling");
    expect(w.wishes()["cam-2"]).toBe("0.2.0");
    const undone = await w.rollouts.act("prod", "undo");
    expect(undone.phase).toBe("RolledBack");
    expect(w.wishes()).toEqual({ "cam-1": "0.1.0", "cam-2": "0.1.0", "cam-3": "-", "cam-4": "-" });
    await w.rollouts.pass();
    expect(w.rollouts.view("prod").phase).toBe("RolledBack");
  });
});

describe("409s and deletion", () => {
  test("a rollout taking a member of one that is not Complete is refused, naming both; once it is Complete, the new one takes it", async () => {
    const w = await rolloutWorld(["cam-1", "cam-2"]);
    await w.put("all", { version: "0.2.0" });
    const refused = w.put("eu", { version: "0.3.0", selector: "tier=prod" });
    await expect(refused).rejects.toThrow(
      'agent rollout "eu" would take node "cam-1" of agent rollout "all", which is not Complete (Canary)',
    );
    expect(w.rollouts.has("eu")).toBe(false);
    for (const n of ["cam-1", "cam-2"]) {
      await w.rollouts.pass();
      w.report(n, "0.2.0", "healthy");
    }
    await w.rollouts.pass();
    expect(w.rollouts.view("all").phase).toBe("Complete");
    const eu = await w.put("eu", { version: "0.3.0", selector: "tier=prod", canary: 0 });
    expect(eu.code).toBe(201);
    expect(w.rollouts.rolloutOf("cam-1")).toBe("eu");
    expect(w.rollouts.view("all").counts.members).toBe(0);
  });

  test("delete leaves the members' wishes; an unknown rollout is NotFound", async () => {
    const w = await rolloutWorld(NODES);
    await w.put("prod", { version: "0.2.0" });
    await w.rollouts.delete("prod");
    expect(w.wishes()["cam-1"]).toBe("0.2.0");
    expect(w.rollouts.rolloutOf("cam-1")).toBeUndefined();
    expect(() => w.rollouts.view("prod")).toThrow('agent rollout "prod" not found');
    expect(await w.rolloutStore.load()).toEqual([]);
  });

  test("a release that is not on the hub is NotFound, and the same spec again is unchanged", async () => {
    const w = await rolloutWorld(NODES);
    await expect(w.put("prod", { version: "9.9.9" })).rejects.toThrow("release 9.9.9 not found");
    await w.put("prod", { version: "0.2.0" });
    expect((await w.put("prod", { version: "0.2.0" })).result).toBe("unchanged");
  });
});

describe("a hub restart", () => {
  test("goes on from where the rollout stood: the planner's record, each from, paused", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agent-rollouts-"));
    dirs.push(dir);
    const w = await rolloutWorld(NODES, join(dir, "hub.db"));
    await w.put("prod", { version: "0.2.0", maxUnavailable: 1 });
    w.report("cam-1", "0.2.0", "healthy");
    await w.rollouts.pass();
    expect(w.wishes()).toEqual({ "cam-1": "0.2.0", "cam-2": "0.2.0", "cam-3": "-", "cam-4": "-" });
    await w.reopen();
    w.report("cam-1", "0.2.0", "healthy");
    w.report("cam-2", "0.2.0", "healthy");
    await w.rollouts.pass();
    expect(w.rollouts.view("prod").phase).toBe("Rolling");
    expect(w.wishes()["cam-3"]).toBe("0.2.0");
    expect((await w.rolloutStore.load())[0]?.record.from).toEqual({
      "cam-1": "0.1.0",
      "cam-2": "0.1.0",
      "cam-3": "0.1.0",
    });
    await w.rollouts.act("prod", "pause");
    await w.reopen();
    await w.rollouts.pass();
    expect(w.rollouts.view("prod").phase).toBe("Paused");
  });
});
