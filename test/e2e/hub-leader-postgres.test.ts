// The election of the replica that runs the hub's singletons (src/hub/pg/leader.ts) on a real
// PostgreSQL (a throwaway cluster, scripts/lib/postgres.ts; needs root and Debian's postgresql):
// two electors on one database, exactly one leads; a leader whose session the server ended
// steps down, its writes refused in their own transaction; a leader process killed or frozen
// hands the lead over within 15 s.
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SQL, type Subprocess, spawn } from "bun";
import { createLocalBus } from "../../src/hub/bus.ts";
import { DeferredDeployWrites } from "../../src/hub/deploy/deferred-store.ts";
import { Deployer } from "../../src/hub/deploy/deployer.ts";
import type { PassWrites } from "../../src/hub/deploy/store.ts";
import { PostgresDeployStore } from "../../src/hub/deploy/store-postgres.ts";
import { NotLeaderError } from "../../src/hub/leader.ts";
import { connectPostgres } from "../../src/hub/pg/connect.ts";
import { PostgresLeaderElector } from "../../src/hub/pg/leader.ts";
import { freshRecord, parseSpec } from "../../src/hub/rollouts/spec.ts";
import { PostgresAgentRolloutStore } from "../../src/hub/rollouts/store-postgres.ts";
import { FakeClock, realClock } from "../../src/util/clock.ts";
import { nullLogger } from "../../src/util/log.ts";
import { type TestDevices, testDevices, webDaemonSet } from "../lib/deploy-devices.ts";
import { postgresForFile } from "../lib/postgres.ts";
import { saveRollout } from "../lib/rollout-store-contract.ts";

const cluster = postgresForFile();

function elector(url: string, tryEveryMs = 2000): PostgresLeaderElector {
  return new PostgresLeaderElector({ url, clock: realClock, log: nullLogger, tryEveryMs });
}

/** The backend pids holding the leader lock in the database at `url`. */
async function holders(sql: SQL): Promise<number[]> {
  const rows = (await sql.unsafe(
    "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1",
  )) as { pid: number }[];
  return rows.map((r) => r.pid);
}

test("two electors on one database: exactly one leads, and a write fenced by the other is refused", async () => {
  const url = await cluster().createDatabase();
  const sql = new SQL(url, { max: 1 });
  const a = elector(url);
  const b = elector(url);
  try {
    for (let round = 0; round < 3; round++) {
      await a.step();
      await b.step();
      expect([a.leading(), b.leading()]).toEqual([true, false]);
    }
    expect((await holders(sql)).length).toBe(1);
    await sql.begin((tx) => a.fence(tx));
    await expect(sql.begin((tx) => b.fence(tx))).rejects.toBeInstanceOf(NotLeaderError);
  } finally {
    a.close();
    b.close();
    await sql.close();
  }
});

test("a leader whose session was ended steps down: its fenced write is refused, the other leads", async () => {
  const url = await cluster().createDatabase();
  const sql = new SQL(url, { max: 1 });
  const a = elector(url);
  const b = elector(url);
  const changes: boolean[] = [];
  a.onChange((l) => changes.push(l));
  try {
    await a.step();
    await b.step();
    expect(a.leading()).toBe(true);
    const [pid] = await holders(sql);
    await sql.unsafe("SELECT pg_terminate_backend($1)", [pid]);
    await expect(sql.begin((tx) => a.fence(tx))).rejects.toBeInstanceOf(NotLeaderError);
    expect(a.leading()).toBe(false);
    expect(changes).toEqual([true, false]);
    await b.step();
    expect(b.leading()).toBe(true);
    await a.step();
    expect(a.leading()).toBe(false);
    await sql.begin((tx) => b.fence(tx));
  } finally {
    a.close();
    b.close();
    await sql.close();
  }
});

test("a leader whose check finds its session gone steps down at its next step", async () => {
  const url = await cluster().createDatabase();
  const sql = new SQL(url, { max: 1 });
  const a = elector(url);
  try {
    await a.step();
    expect(a.leading()).toBe(true);
    const [pid] = await holders(sql);
    await sql.unsafe("SELECT pg_terminate_backend($1)", [pid]);
    await a.step();
    expect(a.leading()).toBe(false);
    await a.step();
    expect(a.leading()).toBe(true);
  } finally {
    a.close();
    await sql.close();
  }
});

/** A child process leading on `url` (test/lib/leader-child.ts), once it says so. */
async function childLeader(url: string): Promise<Subprocess<"ignore", "pipe", "inherit">> {
  const child = spawn([process.execPath, "test/lib/leader-child.ts", url], {
    stdout: "pipe",
    stderr: "inherit",
  });
  const reader = child.stdout.getReader();
  const { value } = await reader.read();
  reader.releaseLock();
  expect(new TextDecoder().decode(value).trim()).toBe("leading");
  return child;
}

/** How long (ms) until `e`, running, leads. */
async function timeToLead(e: PostgresLeaderElector, from: number): Promise<number> {
  while (!e.leading()) await Bun.sleep(100);
  return performance.now() - from;
}

for (const how of ["SIGKILL", "SIGSTOP"] as const)
  test(`a leader process stopped by ${how}: another takes the lead within 15 s`, async () => {
    const url = await cluster().createDatabase();
    const child = await childLeader(url);
    const b = elector(url, 500);
    const stop = new AbortController();
    const running = b.run(stop.signal);
    try {
      await Bun.sleep(1500);
      expect(b.leading()).toBe(false);
      const from = performance.now();
      child.kill(how);
      const took = await timeToLead(b, from);
      console.log(`${how}: the other replica led after ${Math.round(took)} ms`);
      expect(took).toBeLessThan(15_000);
    } finally {
      child.kill("SIGKILL");
      if (how === "SIGSTOP") child.kill("SIGCONT");
      await child.exited;
      stop.abort();
      await running;
    }
  }, 30_000);

/** A deployer over a deploy store on PostgreSQL whose pass writes are recorded in `steps`, run
 * only while `elector` leads (as the hub wires it: hub.ts, singletons.ts). */
async function deployerOn(
  url: string,
  elector: PostgresLeaderElector,
  devices: TestDevices,
  clock: FakeClock,
  steps: string[],
) {
  const sql = new SQL(url, { max: 2 });
  class Recording extends PostgresDeployStore {
    override async writePass(p: PassWrites): Promise<void> {
      await super.writePass(p);
      for (const a of p.assignments) steps.push(`${a.node}=${a.hash}`);
    }
  }
  const inner = new Recording({ sql, size: 2, leaderFence: elector.fence });
  const store = new DeferredDeployWrites(inner, nullLogger, () => clock.now());
  const deployer = new Deployer({
    store,
    loaded: await store.load(),
    fleet: devices.fleet,
    bus: createLocalBus(),
    clock,
    log: nullLogger,
    flushStore: () => devices.store.flush(),
    intervalMs: 1000,
    leadTerm: () => elector.term(),
  });
  return { deployer, sql };
}

test("a DaemonSet rollout goes on at the new leader from where it stood: no step done twice, the old leader's late pass refused", async () => {
  const url = await cluster().createDatabase();
  await (await connectPostgres(url)).close(); // migrated
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-leader-"));
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const devices = await testDevices(dir, clock);
  const nodes = ["cam-1", "cam-2", "cam-3"];
  for (const n of nodes) await devices.join(n, { site: "a" });
  const [ea, eb] = [elector(url), elector(url)];
  const steps: string[] = [];
  const a = await deployerOn(url, ea, devices, clock, steps);
  const b = await deployerOn(url, eb, devices, clock, steps);
  const sql = new SQL(url, { max: 1 });
  try {
    await ea.step();
    await eb.step();
    await a.deployer.reload();
    await b.deployer.reload();
    await a.deployer.apply(webDaemonSet("busybox:1"));
    devices.run(a.deployer, nodes);
    clock.step(1000);
    await a.deployer.reconcile();
    await a.deployer.apply(webDaemonSet("busybox:2")); // the canary: cam-1
    devices.run(a.deployer, nodes);
    clock.step(1000);
    await a.deployer.reconcile(); // the next device: cam-2
    // Each device got v1, then cam-1 (the canary) and cam-2 v2: one write each.
    const stood = [...steps];
    expect(stood.map((s) => s.split("=")[0])).toEqual([...nodes, "cam-1", "cam-2"]);
    // A's session is lost; its next pass (cam-3's step, once cam-2 runs) is refused.
    const [pid] = await holders(sql);
    await sql.unsafe("SELECT pg_terminate_backend($1)", [pid]);
    devices.run(a.deployer, nodes);
    clock.step(1000);
    const before = await new PostgresDeployStore({ sql, size: 1 }).load();
    await a.deployer.reconcile();
    expect(ea.leading()).toBe(false);
    expect(await new PostgresDeployStore({ sql, size: 1 }).load()).toEqual(before);
    // B takes the lead, loads what A stored, and makes only the step that was left.
    steps.length = 0;
    await eb.step();
    expect(eb.leading()).toBe(true);
    await b.deployer.reload();
    devices.run(b.deployer, nodes);
    clock.step(1000);
    await b.deployer.reconcile();
    devices.run(b.deployer, nodes);
    await b.deployer.reconcile();
    expect((await b.deployer.rollout("default", "web")).phase).toBe("Complete");
    const v2 = stood.findLast((s) => s.startsWith("cam-2"))?.split("=")[1];
    expect(steps).toEqual([`cam-3=${v2}`]);
  } finally {
    ea.close();
    eb.close();
    for (const s of [a.sql, b.sql, sql]) await s.close();
    devices.store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 30_000);

test("an agent rollout's record written by its pass is refused when this replica does not lead; the operator's is stored", async () => {
  const url = await cluster().createDatabase();
  const sql = await connectPostgres(url, { max: 1 });
  const [ea, eb] = [elector(url), elector(url)];
  try {
    await ea.step();
    await eb.step();
    const store = new PostgresAgentRolloutStore({ sql, size: 1, leaderFence: eb.fence });
    const r = {
      name: "agents",
      spec: parseSpec({ version: "0.2.0", selector: "" }),
      record: freshRecord(1),
      created: 1,
    };
    await saveRollout(store, r);
    await expect(saveRollout(store, { ...r, created: 2 }, true)).rejects.toBeInstanceOf(
      NotLeaderError,
    );
    expect((await store.load()).map((x) => x.created)).toEqual([1]);
    const leader = new PostgresAgentRolloutStore({ sql, size: 1, leaderFence: ea.fence });
    await saveRollout(leader, { ...r, created: 3 }, true);
    expect((await store.load()).map((x) => x.created)).toEqual([3]);
  } finally {
    ea.close();
    eb.close();
    await sql.close();
  }
});
