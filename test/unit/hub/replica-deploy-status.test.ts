// What the leader's DaemonSet passes decide, at a replica that does not lead (docs/hub-replicas.md,
// "DaemonSet passes at every replica"): it serves the statuses the leader stored, makes its
// rollout view with the leader's phase and record from the assignments it took, forgets the
// revisions the leader pruned, and keeps what it took while it read the store over what the
// read gave. The change log is stood in for by handing the leader's writes to the follower as
// follow.ts does; two deployers share one SQLite store and one fleet.
import { afterEach, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DaemonSet } from "../../../src/api/daemonset.ts";
import { createLocalBus } from "../../../src/hub/bus.ts";
import { Deployer } from "../../../src/hub/deploy/deployer.ts";
import type { DeployStore, PassWrites } from "../../../src/hub/deploy/store.ts";
import { SqliteDeployStore } from "../../../src/hub/deploy/store-sqlite.ts";
import { openHubDatabase } from "../../../src/hub/store-sqlite.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { type TestDevices, testDevices, webDaemonSet } from "../../lib/deploy-devices.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A leader and a follower over one store; `load`: the follower's reads of the store. */
async function pair(load?: (store: DeployStore) => DeployStore["load"]) {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-replica-deploy-"));
  dirs.push(dir);
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const devices = await testDevices(dir, clock);
  await devices.join("cam-1", { site: "a" });
  const store = new SqliteDeployStore(openHubDatabase(join(dir, "hub.db")));
  const decided: PassWrites[] = [];
  const recording: DeployStore = {
    load: () => store.load(),
    putObject: (...a) => store.putObject(...a),
    deleteObject: (...a) => store.deleteObject(...a),
    writePass: async (p) => {
      decided.push(p);
      await store.writePass(p);
    },
  };
  const common = { fleet: devices.fleet, bus: createLocalBus(), clock, log: nullLogger };
  const flushStore = () => devices.store.flush();
  const sent: string[] = [];
  const follower = new Deployer({
    ...{ ...common, store: { ...recording, load: load?.(store) ?? recording.load } },
    ...{ loaded: await store.load(), flushStore, intervalMs: 1000 },
    leadTerm: () => undefined,
    send: (node) => sent.push(node),
  });
  const leader = new Deployer({
    ...{ ...common, store: recording, loaded: await store.load(), flushStore, intervalMs: 1000 },
    leadTerm: () => 1,
  });
  return { devices, store, leader, follower, decided, sent };
}

type Pair = Awaited<ReturnType<typeof pair>>;

/** The leader's writes since the last call, taken by the follower in their order. */
function relay({ decided, follower }: Pair): void {
  for (const p of decided.splice(0)) {
    for (const c of p.assignments) follower.takeAssignment(c.dsUid, c.node, c.hash);
    for (const r of p.pruned) follower.takePruned(r.dsUid, r.hash);
    for (const s of p.statuses) follower.takeShown(s);
  }
}

/** Applies `ds` at the leader; the follower takes it as from the change log. */
async function apply(p: Pair, input: DaemonSet): Promise<string> {
  // As stored: the status is the deployer's, not the object's.
  const { daemonSet: shown } = await p.leader.apply(input);
  const { status: _, ...ds } = shown;
  const uid = ds.metadata.uid ?? "";
  const revision = (await p.store.load()).revisions
    .filter((r) => r.dsUid === uid)
    .sort((a, b) => b.revision - a.revision)[0];
  const [namespace, name] = [ds.metadata.namespace ?? "default", ds.metadata.name];
  const rv = Number(ds.metadata.resourceVersion);
  await p.follower.takeStored({ kind: "DaemonSet", namespace, name, object: ds, rv, revision });
  return uid;
}

/** The device runs what the leader sends it, a few passes over. */
async function runDevice(p: Pair, devices: TestDevices): Promise<void> {
  for (let i = 0; i < 3; i++) {
    devices.run(p.leader, ["cam-1"]);
    await p.leader.reconcile();
  }
}

const limited = (image: string): DaemonSet => {
  const ds = webDaemonSet(image);
  return { ...ds, spec: { ...ds.spec, revisionHistoryLimit: 0 } };
};

test("a deployer that does not lead serves the leader's statuses and a view with its phase, from the assignments and prunes it took", async () => {
  const p = await pair();
  const uid = await apply(p, limited("busybox:1"));
  // The follower holds the DaemonSet, and no status until the leader's is taken.
  expect(p.follower.get("default", "web")?.status).toBeUndefined();
  relay(p);
  expect(p.follower.get("default", "web")?.status).toEqual(p.leader.get("default", "web")?.status);
  await runDevice(p, p.devices);
  relay(p);
  const status = p.leader.get("default", "web")?.status;
  expect(status).toMatchObject({ desiredNumberScheduled: 1, numberAvailable: 1 });
  expect(p.follower.list()[0]?.status).toEqual(status);
  const lead = await p.leader.rollout("default", "web");
  expect(lead.phase).toBe("Complete");
  expect(await p.follower.rollout("default", "web")).toEqual(lead);
  // A new revision: the device moves to it at the leader, and the follower shows it so.
  await apply(p, limited("busybox:2"));
  await runDevice(p, p.devices);
  relay(p);
  const moved = await p.leader.rollout("default", "web");
  expect(moved.devices).toMatchObject([{ name: "cam-1", revision: 2, state: "Updated" }]);
  expect(await p.follower.rollout("default", "web")).toEqual(moved);
  expect(p.follower.list()[0]?.status).toEqual(p.leader.list()[0]?.status);
  // The device stops reporting the first revision's pod: the leader prunes it (a history of
  // none), and so does the follower.
  const old = [...p.devices.fleet.podsOf("cam-1").values()].find(
    (pod) => pod.spec.containers[0]?.image === "busybox:1",
  );
  expect(old).toBeDefined();
  p.devices.fleet.ingest("cam-1", { type: "pod.delete", seq: 100, uid: old?.metadata.uid ?? "" });
  await p.leader.reconcile();
  expect(p.leader.catalog.revisionsOf(uid).map((r) => r.revision)).toEqual([2]);
  expect(p.follower.catalog.revisionsOf(uid).map((r) => r.revision)).toEqual([1, 2]);
  relay(p);
  expect(p.follower.catalog.revisionsOf(uid).map((r) => r.revision)).toEqual([2]);
});

test("an assignment taken while the follower reads the store is kept over the older one the read gave", async () => {
  let opened: () => void = () => {};
  const gate = new Promise<void>((r) => (opened = r));
  let reads = 0;
  // The follower's read is made at once and given back when the gate opens.
  const p = await pair((store) => async () => {
    const state = await store.load();
    reads++;
    await gate;
    return state;
  });
  await apply(p, webDaemonSet("busybox:1"));
  relay(p);
  p.follower.storedDesired("cam-1");
  await Bun.sleep(0);
  expect(reads).toBe(1);
  await apply(p, webDaemonSet("busybox:2"));
  relay(p);
  opened();
  await Bun.sleep(0);
  await p.follower.reconcile();
  expect(p.sent).toEqual(["cam-1"]);
  const text = p.follower.desiredFor("cam-1", undefined, true);
  expect(JSON.parse(text ?? "{}").pods[0]?.spec.containers[0]?.image).toBe("busybox:2");
});
