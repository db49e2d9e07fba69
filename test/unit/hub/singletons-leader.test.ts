// The hub's singletons under a leadership (src/hub/leader.ts) on SQLite stores, with a leader's
// term set by the test: a deployer or agent rollouts that do not lead store operators' objects and
// plan nothing; reloaded in a term, they plan from what is stored; a pass after that term ended
// writes nothing.
import { afterEach, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLocalBus } from "../../../src/hub/bus.ts";
import { Deployer } from "../../../src/hub/deploy/deployer.ts";
import { SqliteDeployStore } from "../../../src/hub/deploy/store-sqlite.ts";
import { AgentRollouts } from "../../../src/hub/rollouts/controller.ts";
import { parseSpec } from "../../../src/hub/rollouts/spec.ts";
import type { AgentRolloutStore } from "../../../src/hub/rollouts/store.ts";
import { SqliteAgentRolloutStore } from "../../../src/hub/rollouts/store-sqlite.ts";
import { openHubDatabase } from "../../../src/hub/store-sqlite.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { testDevices, webDaemonSet } from "../../lib/deploy-devices.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

test("a deployer plans only in the term it loaded the store in", async () => {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-singletons-"));
  dirs.push(dir);
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const devices = await testDevices(dir, clock);
  await devices.join("cam-1", { site: "a" });
  const store = new SqliteDeployStore(openHubDatabase(join(dir, "hub.db")));
  let term: number | undefined;
  const sent: string[] = [];
  const bus = createLocalBus();
  bus.subscribe("desired", (m) => sent.push(m.node));
  const deployer = new Deployer({
    ...{ store, loaded: await store.load(), fleet: devices.fleet, bus, clock, log: nullLogger },
    ...{ flushStore: () => devices.store.flush(), intervalMs: 1000, leadTerm: () => term },
  });
  expect((await deployer.apply(webDaemonSet("busybox:1"))).result).toBe("created");
  expect((await store.load()).assignments).toEqual([]);
  expect(sent).toEqual([]);
  term = 1; // led, not yet loaded: still nothing
  await deployer.reconcile();
  expect(sent).toEqual([]);
  await deployer.reload();
  const v1 = (await store.load()).assignments;
  expect(v1.map((a) => a.node)).toEqual(["cam-1"]);
  expect(sent).toEqual(["cam-1"]);
  term = undefined; // stepped down: a change is stored, not planned
  await deployer.apply(webDaemonSet("busybox:2"));
  term = 2; // a new term, not loaded
  await deployer.reconcile();
  expect(await store.load()).toMatchObject({ assignments: v1 });
  expect(sent).toEqual(["cam-1"]);
  await deployer.reload();
  const v2 = (await store.load()).assignments;
  expect(v2.map((a) => a.node)).toEqual(["cam-1"]);
  expect(v2[0]?.hash).not.toBe(v1[0]?.hash);
  expect(sent).toEqual(["cam-1", "cam-1"]);
});

test("agent rollouts step only in the term they loaded the store in", async () => {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-singletons-"));
  dirs.push(dir);
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const store = new SqliteAgentRolloutStore(openHubDatabase(join(dir, "hub.db")));
  let term: number | undefined;
  const saved: string[] = [];
  const recording: AgentRolloutStore = {
    load: () => store.load(),
    change: async (name, change, byPass) => {
      saved.push(byPass === true ? "pass" : "operator");
      return store.change(name, change);
    },
  };
  const wishes: string[] = [];
  const rollouts = new AgentRollouts(
    {
      store: recording,
      nodes: () => [{ name: "cam-1", labels: { site: "a" } }],
      online: () => true,
      updates: {
        wantedFor: () => undefined,
        setWishes: async (w) => {
          for (const [n, v] of w) wishes.push(`${n}=${v}`);
          return [...w.keys()];
        },
        running: () => "0.1.0",
        lastStatus: () => undefined,
        offeredAt: () => undefined,
      },
      hasRelease: async () => true,
      changed: () => {},
      clock,
      log: nullLogger,
      leadTerm: () => term,
    },
    [],
  );
  await rollouts.put("agents", parseSpec({ version: "0.2.0", selector: "site=a" }));
  expect(saved).toEqual(["operator"]);
  expect(wishes).toEqual([]);
  term = 1;
  await rollouts.pass();
  expect(wishes).toEqual([]);
  await rollouts.reload();
  expect(saved).toEqual(["operator", "pass"]);
  expect(wishes).toEqual(["cam-1=0.2.0"]);
});
