// Devices held by one replica, handled at another: agent updates, agent rollouts, device facts and
// a revoke across two compiled replicas (docs/hub-replicas.md, "Node updates and agent rollouts";
// docs/hub-releases.md) on a real PostgreSQL and nats-server: A leads (started first), B does
// not, and every device's agent is connected to B only, spoken at the protocol level
// (test/lib/update-agents.ts: it announces "updates", records the `update` offers and reports
// update.status as told; it never downloads nor runs a release). The operator talks to A unless
// a test says otherwise. Shown: a release pushed at A serves at both; a per-node update set at A
// is offered by B and shown at B; the agent's update.status at B shows at A; an agent rollout
// created at B is run by the leader A to Complete; a pause at B holds the leader's rollout and a
// resume at A lets it go on; a device's health history and clock skew, reported to B, are
// served at A; a device revoked at A is let go by B, refused there, and stays revoked. The release is a signed copy of /usr/bin/true (as in
// hub-agent-rollouts.test.ts). Needs root (test PostgreSQL), Debian's postgresql and
// nats-server, and dist/fleetlet (scripts/build); no containerd, no test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type NatsServer, startNatsServer } from "../../scripts/lib/nats.ts";
import { PostgresCluster } from "../../scripts/lib/postgres.ts";
import { HUB_ANNOTATIONS } from "../../src/protocol/index.ts";
import { nodeArch, ProtocolClient, TestHub } from "../lib/hub.ts";
import { startReplica } from "../lib/replicas.ts";
import { eventually, fleetletBin } from "../lib/testbed.ts";
import { archKnownAt, UpdateAgent } from "../lib/update-agents.ts";

const V = "9.9.2-rep";
/** The replicas' pass of agent rollouts. */
const ROLLOUT_MS = 300;
const LEADING = "leading: this replica runs the hub's singletons";
const dir = mkdtempSync(join(tmpdir(), "fleetlet-replica-updates-"));
const exe = join(dir, "fleetlet");
const keyFile = join(dir, "secrets.key");
let pg: PostgresCluster;
let nats: NatsServer;
let a: TestHub;
let b: TestHub;
const hubs: TestHub[] = [];
const agents = new Map<string, UpdateAgent>();
const agent = (name: string) => agents.get(name) as UpdateAgent;

function replica(url: string, id: string): TestHub {
  const args = ["--store", url, "--bus", nats.url, "--secrets-key-file", keyFile];
  const intervals = ["--leader-interval", "500ms", "--rollout-interval", `${ROLLOUT_MS}ms`];
  const hub = new TestHub([...args, "--replica-id", id, ...intervals], "127.0.0.1", true);
  hubs.push(hub);
  return hub;
}

function run(args: string[]) {
  const p = Bun.spawnSync([fleetletBin, ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
}

/** `fleetlet ARGS` against replica `hub`, trusting the replicas' CA. */
function cli(hub: TestHub, ...args: string[]) {
  const ca = join(hub.dataDir, "tls", "ca.crt");
  return run([...args, "--hub", hub.url, "--token", hub.operatorToken, "--ca-file", ca]);
}

/** An operator GET at `hub`: its status and body. */
async function get<T>(hub: TestHub, path: string): Promise<{ status: number; body: T }> {
  const res = await hub.api(path);
  const text = await res.text();
  return { status: res.status, body: (text.startsWith("{") ? JSON.parse(text) : text) as T };
}

type NodeUpdate = { node: string; wanted?: string; phase?: string; bytes?: number };

/** `node`'s row of GET /api/v1/updates at `hub`, if listed. */
async function updateRow(hub: TestHub, node: string): Promise<NodeUpdate | undefined> {
  const { body } = await get<{ items?: NodeUpdate[] }>(hub, "/api/v1/updates");
  return body.items?.find((u) => u.node === node);
}

type View = {
  phase: string;
  paused: boolean;
  counts: Record<string, number>;
  nodes: { node: string; wanted?: string; phase?: string }[];
};

/** Waits until GET of agent rollout `name` at `hub` answers 200 with a view that `ok`. */
function viewAt(hub: TestHub, name: string, what: string, ok: (v: View) => boolean, ms = 10_000) {
  return eventually(
    `agent rollout ${name} at ${hub === a ? "a" : "b"}: ${what}`,
    async () => {
      const { status, body } = await get<View>(hub, `/api/v1/agentrollouts/${name}`);
      return status === 200 && ok(body) ? body : undefined;
    },
    ms,
  );
}

beforeAll(async () => {
  pg = await PostgresCluster.start();
  nats = await startNatsServer();
  writeFileSync(keyFile, `${Buffer.alloc(32, 9).toString("base64")}\n`, { mode: 0o600 });
  copyFileSync("/usr/bin/true", exe);
  expect(run(["release", "keygen", "--out", join(dir, "ops")]).code).toBe(0);
  const signed = run(["release", "sign", "--key", join(dir, "ops.key"), "--version", V, exe]);
  expect(signed.stderr).toBe("");
  const url = await pg.createDatabase();
  a = replica(url, "upd-a");
  b = replica(url, "upd-b");
  await startReplica(a);
  await eventually("replica a to lead", () => a.output.includes(LEADING) || undefined);
  await startReplica(b);
  const push = cli(a, "hub", "release", "push", exe, "--signature", `${exe}.sig`);
  expect(push.stderr).toBe("");
  expect(push.code).toBe(0);
  // u-1: a per-node update; r-1, r-2: the rollout made at B; p-1, p-2: the one paused at B.
  const fleets: [string, string][] = [
    ["u-1", "u"],
    ["r-1", "r"],
    ["r-2", "r"],
    ["p-1", "p"],
    ["p-2", "p"],
    ["h-1", "h"],
    ["v-1", "v"],
  ];
  for (const [name, fleet] of fleets) {
    const ag = new UpdateAgent(name, { fleet });
    if (name === "h-1") ag.clockOffsetMs = -3_600_000; // an hour behind
    agents.set(name, ag);
    await ag.join(b);
    await ag.connect(b);
  }
  // Both replicas know every node's arch (its Node report, through the change log at A).
  for (const ag of agents.values()) for (const hub of [a, b]) await archKnownAt(hub, ag);
}, 120_000);
afterAll(async () => {
  for (const ag of agents.values()) ag.close();
  for (const h of hubs) await h.cleanup();
  await nats?.stop();
  await pg?.remove();
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe("devices held by replica B, handled at replica A (compiled)", () => {
  test("a release pushed at A is listed and served at both replicas", async () => {
    const pushed = readFileSync(`${exe}.sig`, "utf8");
    for (const hub of [a, b]) {
      const list = await get<{ items: { version: string; arch: string }[] }>(
        hub,
        "/api/v1/releases",
      );
      expect(list.body.items).toContainEqual(
        expect.objectContaining({ version: V, arch: nodeArch }),
      );
      const manifest = await hub.api(`/api/v1/releases/${V}/${nodeArch}/manifest`);
      expect(manifest.status).toBe(200);
      expect(await manifest.text()).toBe(pushed);
    }
    expect(b.output).not.toContain(LEADING);
  });

  test("a per-node update set at A is offered to the agent at B, and B lists the node's wish", async () => {
    const set = cli(a, "hub", "update", "u-1", "--version", V);
    expect(set.stderr).toBe("");
    expect(set.stdout).toBe(`node/u-1 update to ${V} set\n`);
    expect((await updateRow(a, "u-1"))?.wanted).toBe(V);
    await agent("u-1").waitOffer(V, 5000);
    const atB = await eventually(
      "u-1's wish at b",
      async () => ((await updateRow(b, "u-1"))?.wanted === V ? updateRow(b, "u-1") : undefined),
      5000,
    );
    expect(atB).toMatchObject({ node: "u-1", wanted: V });
  }, 30_000);

  test("the update.status the agent sends to B shows at A", async () => {
    agent("u-1").report(V, "downloading", { bytes: 25, total: 100 });
    const downloading = await eventually(
      "u-1 downloading at a",
      async () => {
        const row = await updateRow(a, "u-1");
        return row?.phase === "downloading" ? row : undefined;
      },
      5000,
    );
    expect(downloading).toMatchObject({ node: "u-1", wanted: V, bytes: 25 });
    agent("u-1").report(V, "healthy");
    await eventually(
      "u-1 healthy at a",
      async () => (await updateRow(a, "u-1"))?.phase === "healthy" || undefined,
      5000,
    );
  }, 30_000);

  test("an agent rollout created at B is run by the leader A to Complete", async () => {
    const up = cli(b, "hub", "upgrade", "rr", "--version", V, "-l", "fleet=r");
    expect(up.stderr).toBe("");
    expect(up.stdout).toBe("agentrollout/rr created\n");
    await viewAt(a, "rr", "known", () => true, 5000);
    // The canary (1), then the other member.
    await agent("r-1").waitOffer(V, 10_000);
    agent("r-1").report(V, "healthy");
    await agent("r-2").waitOffer(V, 10_000);
    agent("r-2").report(V, "healthy");
    const done = await viewAt(a, "rr", "Complete", (v) => v.phase === "Complete");
    expect(done.counts).toEqual({ members: 2, updated: 2, healthy: 2, unavailable: 0, offline: 0 });
    expect(done.nodes.map((n) => [n.node, n.wanted])).toEqual([
      ["r-1", V],
      ["r-2", V],
    ]);
    // B, which does not lead, also answers for it: how is printed for the report.
    const atB = await get<View>(b, "/api/v1/agentrollouts/rr");
    console.log(`B answers GET agentrollouts/rr: ${atB.status} ${JSON.stringify(atB.body)}`);
    if (atB.status !== 503) await viewAt(b, "rr", "Complete", (v) => v.phase === "Complete");
  }, 60_000);

  test("a pause at B holds the leader's rollout; a resume at A lets it go on", async () => {
    // Made at A, so that only the pause crosses replicas; one member at a time (the canary).
    const up = cli(a, "hub", "upgrade", "rp", "--version", V, "-l", "fleet=p");
    expect(up.stdout).toBe("agentrollout/rp created\n");
    await agent("p-1").waitOffer(V, 10_000);
    const paused = cli(b, "rollout", "pause", "agentrollout/rp");
    expect(paused.stderr).toBe("");
    expect(paused.stdout).toBe("agentrollout/rp paused\n");
    await viewAt(a, "rp", "Paused", (v) => v.phase === "Paused", 5000);
    agent("p-1").report(V, "healthy");
    await eventually(
      "p-1 healthy at a",
      async () => (await updateRow(a, "p-1"))?.phase === "healthy" || undefined,
      5000,
    );
    // Ten of the leader's passes: none moves p-2.
    await Bun.sleep(10 * ROLLOUT_MS);
    expect(agent("p-2").offers()).toEqual([]);
    expect((await updateRow(a, "p-2"))?.wanted).toBeUndefined();
    const still = await viewAt(a, "rp", "Paused", () => true);
    expect(still.phase).toBe("Paused");
    const resumed = cli(a, "rollout", "resume", "agentrollout/rp");
    expect(resumed.stdout).toBe("agentrollout/rp resumed\n");
    await agent("p-2").waitOffer(V, 10_000);
  }, 60_000);

  test("a device's health history and clock skew, reported to B, are served at A", async () => {
    const h1 = agent("h-1");
    h1.health(1_000);
    h1.health(2_000);
    type Health = { node: string; latest?: { collectedAt: number }; history: unknown[] };
    const health = await eventually(
      "h-1's health at b",
      async () => {
        const { status, body } = await get<Health>(b, "/api/v1/nodes/h-1/health");
        return status === 200 && body.history.length === 2 ? body : undefined;
      },
      5000,
    );
    const atA = await get<Health>(a, "/api/v1/nodes/h-1/health");
    expect(atA.status).toBe(200);
    expect(atA.body).toEqual(health);
    expect(atA.body.latest?.collectedAt).toBe(2_000);
    const skewAt = async (hub: TestHub) => {
      const { body } = await get<{ metadata: { annotations?: Record<string, string> } }>(
        hub,
        "/api/v1/nodes/h-1",
      );
      return body.metadata.annotations?.[HUB_ANNOTATIONS.clockSkew];
    };
    const skew = await eventually("h-1's clock skew at b", () => skewAt(b), 5000);
    expect(skew).toMatch(/^-(1h0m0s|59m59s)$/);
    await eventually("h-1's clock skew at a", async () => (await skewAt(a)) === skew || undefined);
  }, 30_000);

  test("a device revoked at A is let go by B, refused there, and stays revoked at both", async () => {
    const v1 = agent("v-1");
    const client = v1.client as ProtocolClient;
    const revoke = await a.api("/api/v1/nodes/v-1/revoke", { method: "POST" });
    expect(revoke.status).toBe(200);
    const closed = await client.waitClosed(5000);
    console.log(`B closed v-1's connection: ${JSON.stringify(closed)}`);
    const again = new ProtocolClient(b.url, v1.credential, b.caPem);
    const refused = await again.opened.then(
      () => again.waitClosed(5000),
      () => ({ code: 0, reason: "upgrade refused" }),
    );
    expect(refused).toBeDefined();
    expect(again.received.find((m) => m.type === "welcome")).toBeUndefined();
    // B's own writes of the node since (offline) do not take the revoke back.
    type NodeView = { metadata: { annotations?: Record<string, string> } };
    const offlineAtA = await eventually("v-1 offline at a", async () => {
      const { body } = await get<NodeView>(a, "/api/v1/nodes/v-1");
      return body.metadata.annotations?.[HUB_ANNOTATIONS.online] === "false" ? body : undefined;
    });
    expect(offlineAtA.metadata.annotations?.[HUB_ANNOTATIONS.revoked]).toBeDefined();
    const atB = await get<NodeView>(b, "/api/v1/nodes/v-1");
    expect(atB.body.metadata.annotations?.[HUB_ANNOTATIONS.revoked]).toBeDefined();
  }, 30_000);
});
