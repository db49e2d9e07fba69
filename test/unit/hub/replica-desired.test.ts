// The desired state of a device whose agent one replica holds while another leads
// (docs/hub-replicas.md, "Singletons"): the holder takes the leader's higher generation from the
// node's row and no view lets a generation go down (fleet-replica.ts); a deployer that does not
// lead sends, and raises above a welcomed agent's generation, only from the assignments it read
// from the store (deploy/refresh.ts, deployer.ts), one load at a time.
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLocalBus } from "../../../src/hub/bus.ts";
import { Deployer } from "../../../src/hub/deploy/deployer.ts";
import { DesiredRefresh, type RefreshNodes } from "../../../src/hub/deploy/refresh.ts";
import type { DeployState } from "../../../src/hub/deploy/store.ts";
import { SqliteDeployStore } from "../../../src/hub/deploy/store-sqlite.ts";
import { ReplicaFleet } from "../../../src/hub/fleet-replica.ts";
import { keepHolderFields } from "../../../src/hub/node-sessions.ts";
import type { NodeProgress, NodeRecord } from "../../../src/hub/store.ts";
import { openHubDatabase, SqliteHubStore } from "../../../src/hub/store-sqlite.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { testDevices, webDaemonSet } from "../../lib/deploy-devices.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const record = (name: string, generation: number, hash: string): NodeRecord => ({
  name,
  credentialHash: "c",
  hubLabels: {},
  joinedAt: 0,
  ackedSeq: 0,
  connected: true,
  desiredGeneration: generation,
  desiredHash: hash,
  ackedGeneration: 0,
  online: true,
});

async function replicaFleet(nodes: NodeRecord[], store = new SqliteHubStore(":memory:")) {
  const loaded = { ...(await store.load()), nodes };
  const opts = { store, maxEventsPerNode: 10, offlineAfterMs: 3000, onChange: () => {} };
  return new ReplicaFleet({ ...opts, now: () => 0, storedOnline: true }, loaded);
}

describe("ReplicaFleet, a node's desired generation", () => {
  test("the holder takes a higher generation from another replica's row, not a lower one", async () => {
    const fleet = await replicaFleet([record("cam-1", 3, "h3")]);
    const hello = { type: "hello" as const, protocolVersion: 1, nodeName: "cam-1" };
    fleet.connect("cam-1", { ...hello, agentVersion: "t", streamId: "s" }, 0);
    expect(fleet.applyStoredNode(record("cam-1", 2, "h2"))).toEqual({ taken: false });
    expect(fleet.nodes.get("cam-1")).toMatchObject({ desiredGeneration: 3, desiredHash: "h3" });
    expect(fleet.applyStoredNode(record("cam-1", 4, "h4"))).toEqual({
      taken: false,
      desired: true,
    });
    expect(fleet.nodes.get("cam-1")).toMatchObject({ desiredGeneration: 4, desiredHash: "h4" });
  });

  test("a node held elsewhere keeps the higher generation this view had", async () => {
    const fleet = await replicaFleet([record("cam-1", 5, "h5")]);
    expect(fleet.applyStoredNode(record("cam-1", 4, "h4")).taken).toBe(true);
    expect(fleet.nodes.get("cam-1")).toMatchObject({ desiredGeneration: 5, desiredHash: "h5" });
    fleet.applyStoredNode(record("cam-1", 6, "h6"));
    expect(fleet.nodes.get("cam-1")).toMatchObject({ desiredGeneration: 6, desiredHash: "h6" });
  });

  test("what the holder's agent said of its desired state (a refusal, conflicts) is stored with the node and seen by every replica", async () => {
    const queued: NodeProgress[] = [];
    const store = new SqliteHubStore(":memory:");
    store.queueProgress = (p) => void queued.push(p);
    const holder = await replicaFleet([record("cam-1", 2, "h2")], store);
    const conflicts = [{ pod: "default/web-cam-1", uid: "u1", message: "a static pod has it" }];
    const refused = { generation: 2, reason: "secrets not allowed" };
    holder.setDesiredAck("cam-1", { generation: 1, refused, conflicts });
    const report = { refused, conflicts };
    expect(queued.at(-1)?.desiredReport).toEqual(report);
    // The leader, which does not hold the node, reads it from the node's row.
    const leader = await replicaFleet([record("cam-1", 2, "h2")]);
    expect(leader.desiredReport("cam-1")).toBeUndefined();
    leader.applyStoredNode({ ...record("cam-1", 2, "h2"), desiredReport: report });
    expect(leader.desiredReport("cam-1")).toEqual(report);
    // Another replica's write of the node (an operator's label) keeps the holder's report.
    const mine = { ...record("cam-1", 2, "h2"), hubLabels: { site: "b" } };
    const theirs = { ...record("cam-1", 2, "h2"), desiredReport: report };
    expect(keepHolderFields(mine, theirs)).toMatchObject({
      hubLabels: { site: "b" },
      desiredReport: report,
    });
    // An ack with nothing to say clears it.
    holder.setDesiredAck("cam-1", { generation: 2 });
    expect(holder.desiredReport("cam-1")).toBeUndefined();
    expect(queued.at(-1)?.desiredReport).toBeUndefined();
  });

  test("that the holder sent its device's state without its Secrets is stored with the node, seen by the leader, and kept by other replicas' writes", async () => {
    const queued: NodeProgress[] = [];
    const store = new SqliteHubStore(":memory:");
    store.queueProgress = (p) => void queued.push(p);
    const holder = await replicaFleet([record("cam-1", 2, "h2")], store);
    expect(holder.setSecretsWithheld("cam-1", true)).toBe(true);
    expect(holder.setSecretsWithheld("cam-1", true)).toBe(false);
    expect(queued).toHaveLength(1);
    expect(queued[0]?.secretsWithheld).toBe(true);
    const leader = await replicaFleet([record("cam-1", 2, "h2")]);
    leader.applyStoredNode({ ...record("cam-1", 2, "h2"), secretsWithheld: true });
    expect(leader.nodes.get("cam-1")?.secretsWithheld).toBe(true);
    const mine = { ...record("cam-1", 2, "h2"), hubLabels: { site: "b" } };
    const theirs = { ...record("cam-1", 2, "h2"), secretsWithheld: true as const };
    expect(keepHolderFields(mine, theirs).secretsWithheld).toBe(true);
    // Sent with them again (a TLS connection): cleared and stored.
    expect(holder.setSecretsWithheld("cam-1", false)).toBe(true);
    expect(queued.at(-1)?.secretsWithheld).toBeUndefined();
  });
});

test("asks made while a load is under way are taken together by the next load; a failed load is tried again", async () => {
  const clock = new FakeClock();
  const loads: ((s: DeployState) => void)[] = [];
  const fails: ((e: Error) => void)[] = [];
  const taken: [string, number | undefined][][] = [];
  const refresh = new DesiredRefresh({
    load: () =>
      new Promise<DeployState>((resolve, reject) => {
        loads.push(resolve);
        fails.push(reject);
      }),
    take: async (_loaded, nodes: RefreshNodes) => {
      taken.push([...nodes]);
    },
    clock,
    log: nullLogger,
    retryMs: 1000,
  });
  const state: DeployState = {
    resourceVersion: 0,
    objects: [],
    revisions: [],
    statuses: [],
    rollouts: [],
    assignments: [],
  };
  const settle = () => new Promise((r) => setTimeout(r, 0));
  refresh.ask("a");
  refresh.ask("b", 3);
  refresh.ask("c");
  refresh.ask("b");
  expect(loads.length).toBe(1);
  loads[0]?.(state);
  await settle();
  expect(taken).toEqual([[["a", undefined]]]);
  expect(loads.length).toBe(2);
  fails[1]?.(new Error("down"));
  await settle();
  expect(loads.length).toBe(2);
  clock.step(1000);
  await settle();
  expect(loads.length).toBe(3);
  loads[2]?.(state);
  await settle();
  expect(taken[1]).toEqual([
    ["b", 3],
    ["c", undefined],
  ]);
});

test("a deployer that does not lead sends the assignments the leader stored, and raises a welcomed agent's generation only from them", async () => {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-replica-desired-"));
  dirs.push(dir);
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const devices = await testDevices(dir, clock);
  await devices.join("cam-1", { site: "a" });
  const store = new SqliteDeployStore(openHubDatabase(join(dir, "hub.db")));
  const common = { fleet: devices.fleet, bus: createLocalBus(), clock, log: nullLogger };
  const flushStore = () => devices.store.flush();
  const follower = new Deployer({
    ...{ ...common, store, loaded: await store.load(), flushStore, intervalMs: 1000 },
    leadTerm: () => undefined,
    send: (node) => {
      sent.push(node);
      onSend?.();
    },
  });
  const leader = new Deployer({
    ...{ ...common, store, loaded: await store.load(), flushStore, intervalMs: 1000 },
    leadTerm: () => 1,
  });
  const sent: string[] = [];
  let onSend: (() => void) | undefined;
  const nextSend = () => new Promise<void>((r) => (onSend = r));
  /** The DaemonSet as the leader stored it, taken by the follower as from the change log
   * (its newest revision with it): what the follower lacks is the assignments. */
  const follow = async (image: string) => {
    const { daemonSet: ds } = await leader.apply(webDaemonSet(image));
    const revisions = (await store.load()).revisions.filter((r) => r.dsUid === ds.metadata.uid);
    const [namespace, name] = [ds.metadata.namespace ?? "default", ds.metadata.name];
    const rv = Number(ds.metadata.resourceVersion);
    const revision = revisions.sort((a, b) => b.revision - a.revision)[0];
    await follower.takeStored({ kind: "DaemonSet", namespace, name, object: ds, rv, revision });
  };
  const image = (text: string | undefined) =>
    text === undefined ? undefined : JSON.parse(text).pods[0]?.spec.containers[0]?.image;
  await follow("busybox:1");
  const gen = devices.fleet.nodes.get("cam-1")?.desiredGeneration ?? 0;
  expect(gen).toBeGreaterThan(0);
  // Before it reads the store, the follower has the DaemonSet and not its assignment; the bus
  // has it send nothing: it waits for the node's row, then reads the store.
  expect(image(follower.desiredFor("cam-1", undefined, true))).toBeUndefined();
  follower.desiredChanged("cam-1");
  expect(sent).toEqual([]);
  const read = nextSend();
  follower.storedDesired("cam-1");
  await read;
  expect(image(follower.desiredFor("cam-1", undefined, true))).toBe("busybox:1");
  // Welcomed at the follower with a generation above the stored one: raised from the store.
  await follow("busybox:2");
  const welcomed = nextSend();
  const stored = devices.fleet.nodes.get("cam-1")?.desiredGeneration ?? 0;
  expect(follower.desiredFor("cam-1", stored + 5, true)).toBeUndefined();
  await welcomed;
  expect(sent).toEqual(["cam-1", "cam-1"]);
  expect(devices.fleet.nodes.get("cam-1")?.desiredGeneration).toBe(stored + 6);
  const text = follower.desiredFor("cam-1", undefined, true);
  expect(image(text)).toBe("busybox:2");
  expect(JSON.parse(text ?? "{}").generation).toBe(stored + 6);
});
