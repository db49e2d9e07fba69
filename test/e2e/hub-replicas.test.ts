// The compiled hub on PostgreSQL and NATS (`fleetlet hub --store postgres://… --bus nats://…`,
// docs/hub-replicas.md): a compiled agent joins a replica and reports its pod; the replica is
// stopped and another started on a new data folder with the same store keeps the CA, the
// operator token and the agent (same credential, nothing lost); /readyz says so while PostgreSQL
// is down; two replicas started at once on one empty database end with one schema, one CA and one
// operator token; and what is refused. Real PostgreSQL (scripts/lib/postgres.ts) and nats-server
// (scripts/lib/nats.ts). Needs root, the test bed and scripts/build.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SQL } from "bun";
import { type NatsServer, startNatsServer } from "../../scripts/lib/nats.ts";
import { PostgresCluster } from "../../scripts/lib/postgres.ts";
import type { Node } from "../../src/api/node.ts";
import { MIGRATIONS } from "../../src/hub/pg/migrations.ts";
import { TestAgent } from "../lib/agent.ts";
import { TestHub } from "../lib/hub.ts";
import { sleeperManifest } from "../lib/manifests.ts";
import { closedPorts, startReplica } from "../lib/replicas.ts";
import { eventually, fleetletBin } from "../lib/testbed.ts";

let pg: PostgresCluster;
let nats: NatsServer;
const dir = mkdtempSync(join(tmpdir(), "fleetlet-replicas-e2e-"));
const keyFile = join(dir, "secrets.key");
const hubs: TestHub[] = [];

/** A replica on database `url`: HTTPS with the store's CA, the operator token from its file. */
function replica(url: string, id: string): TestHub {
  const args = ["--store", url, "--bus", nats.url, "--secrets-key-file", keyFile];
  const hub = new TestHub(
    [...args, "--replica-id", id, "--heartbeat-interval", "1s"],
    "127.0.0.1",
    true,
  );
  hubs.push(hub);
  return hub;
}

beforeAll(async () => {
  pg = await PostgresCluster.start();
  nats = await startNatsServer();
  writeFileSync(keyFile, `${Buffer.alloc(32, 7).toString("base64")}\n`, { mode: 0o600 });
}, 60_000);
afterAll(async () => {
  for (const h of hubs) await h.cleanup();
  await nats?.stop();
  await pg?.remove();
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

/** `fleetlet hub ARGS`: its exit code and output. */
function runHub(args: string[]): { code: number | null; output: string } {
  const r = Bun.spawnSync([fleetletBin, "hub", "--data", join(dir, "refused"), ...args]);
  return { code: r.exitCode, output: r.stdout.toString() + r.stderr.toString() };
}

describe("what `fleetlet hub` refuses with --store and --bus", () => {
  test("--store without --bus, --bus without --store, a store that is not postgres://", () => {
    const store = "postgres://postgres@127.0.0.1:1/x";
    const alone = runHub(["--store", store]);
    expect(alone.code).toBe(2);
    expect(alone.output).toContain("--store needs --bus");
    const bus = runHub(["--bus", "nats://127.0.0.1:4222"]);
    expect(bus.code).toBe(2);
    expect(bus.output).toContain("--bus needs --store");
    const mysql = runHub(["--store", "mysql://root@127.0.0.1/x", "--bus", "nats://127.0.0.1:4222"]);
    expect(mysql.code).toBe(2);
    expect(mysql.output).toContain("want postgres://USER@HOST:PORT/DB");
    const badBus = runHub(["--store", store, "--bus", "http://127.0.0.1:4222"]);
    expect(badBus.code).toBe(2);
    expect(badBus.output).toContain("want nats://HOST:PORT");
  });
});

describe("two replicas started at once on one empty database", () => {
  test("one schema, one CA, one operator token, and both answer with it", async () => {
    const url = await pg.createDatabase();
    const [a, b] = [replica(url, "hub-a"), replica(url, "hub-b")] as [TestHub, TestHub];
    await Promise.all([startReplica(a), startReplica(b)]);
    expect(readFileSync(join(b.dataDir, "tls", "ca.crt"), "utf8")).toBe(a.caPem);
    expect(b.operatorToken).toBe(a.operatorToken);
    expect(a.operatorToken).toMatch(/^flo_/);
    expect(b.caHash).toBe(a.caHash);
    const sql = new SQL(url, { max: 1 });
    try {
      const versions = await sql.unsafe("SELECT version FROM schema_migrations ORDER BY version");
      expect(versions.map((v: { version: number }) => v.version)).toEqual(
        MIGRATIONS.map((m) => m.version),
      );
      expect((await sql.unsafe("SELECT count(*)::int AS n FROM hub_identity"))[0].n).toBe(1);
      // The keys and the token are sealed in the store, not stored as they are.
      const [row] = await sql.unsafe("SELECT ca_key, operator_token FROM hub_identity");
      expect(row.operator_token).not.toContain(a.operatorToken);
      expect(row.ca_key).toStartWith("sealed:v1:");
    } finally {
      await sql.close();
    }
    for (const hub of [a, b]) {
      expect((await hub.api("/api/v1/nodes")).status).toBe(200);
      expect((await hub.api("/api/v1/nodes", {}, "flo_wrong")).status).toBe(401);
    }
    // A join token made at one replica joins at the other, and its use counts at both.
    const made = await a.api("/api/v1/join-tokens", {
      method: "POST",
      body: JSON.stringify({ ttl: "1h", uses: 1 }),
    });
    expect(made.status).toBe(201);
    const { token } = (await made.json()) as { token: string };
    expect((await b.join(token, "joined-at-b")).status).toBe(200);
    const again = await a.join(token, "joined-at-a");
    expect(again.status).toBe(401);
    expect(await again.text()).toContain("already used");
    // A token made at A after B started is listed at B (with the uses counted at B), revoked at
    // B, and then refused at A.
    const listed = (await (await b.api("/api/v1/join-tokens")).json()) as {
      items: { id: string; used: number; revoked: boolean }[];
    };
    expect(listed.items.map((t) => [t.used, t.revoked])).toEqual([[1, false]]);
    const second = await a.api("/api/v1/join-tokens", {
      method: "POST",
      body: JSON.stringify({ ttl: "1h" }),
    });
    const { id: secondId, token: secondToken } = (await second.json()) as {
      id: string;
      token: string;
    };
    const atB = (await (await b.api("/api/v1/join-tokens")).json()) as { items: { id: string }[] };
    expect(atB.items.map((t) => t.id)).toContain(secondId);
    expect((await b.api(`/api/v1/join-tokens/${secondId}`, { method: "DELETE" })).status).toBe(200);
    const revoked = await a.join(secondToken, "joined-at-a");
    expect(revoked.status).toBe(401);
    expect(await revoked.text()).toContain("join token revoked");
  }, 90_000);
});

describe("a compiled agent on a replica (needs root and the test bed)", () => {
  const agentArgs = [
    ...["--hub-reconnect-back-off-base", "200ms", "--hub-reconnect-back-off-max", "1s"],
    ...["--node-status-update-frequency", "1s"],
  ];
  const agent = new TestAgent({ args: agentArgs });
  afterAll(() => agent.cleanup(), 60_000);
  let dbUrl = "";

  function online(hub: TestHub): Promise<Node> {
    return eventually(
      "the device online in the hub",
      async () => {
        const res = await hub.api(`/api/v1/nodes/${agent.nodeName}`);
        const node = res.status === 200 ? ((await res.json()) as Node) : undefined;
        return node?.metadata.annotations?.["hub.fleetlet.io/online"] === "true" ? node : undefined;
      },
      20_000,
      100,
    );
  }

  test("joins, reports its pod; the hub restarted on a new data folder keeps CA, token and agent", async () => {
    const url = await pg.createDatabase();
    dbUrl = url;
    const first = replica(url, "hub-a");
    first.port = (await closedPorts(1))[0] as number;
    await startReplica(first);
    agentArgs.push("--hub", first.url, "--join-token", await first.joinToken());
    await agent.start();
    agent.writeManifest("web.yaml", sleeperManifest("web", agent.tb.busybox));
    await online(first);
    const web = await first.runningPod(agent.nodeName, "web");
    const credential = readFileSync(join(agent.rootDir, "hub", "credential"), "utf8");
    await first.stop();

    agent.writeManifest("late.yaml", sleeperManifest("late", agent.tb.busybox));
    await agent.waitPod("late", "Running", (p) => p.status?.phase === "Running");
    const second = replica(url, "hub-b");
    second.port = first.port;
    await startReplica(second);
    expect(second.url).toBe(first.url);
    expect(second.caPem).toBe(first.caPem);
    expect(second.caHash).toBe(first.caHash);
    expect(second.operatorToken).toBe(first.operatorToken);
    await online(second);
    await second.runningPod(agent.nodeName, "late");
    const again = await second.runningPod(agent.nodeName, "web");
    expect(again.status?.containerStatuses?.[0]?.containerID).toBe(
      web.status?.containerStatuses?.[0]?.containerID,
    );
    expect(readFileSync(join(agent.rootDir, "hub", "credential"), "utf8")).toBe(credential);
  }, 120_000);

  test("/readyz says 503 while PostgreSQL is down, and ok once it is back, the report kept", async () => {
    const hub = hubs.at(-1) as TestHub;
    expect((await fetch(`${hub.url}/readyz`, hub.fetchTls())).status).toBe(200);
    await pg.stopServer();
    try {
      // A new pod: the agent reports it, and the hub cannot store the report.
      agent.writeManifest("while-down.yaml", sleeperManifest("while-down", agent.tb.busybox));
      const down = await eventually(
        "/readyz to fail",
        async () => {
          const res = await fetch(`${hub.url}/readyz`, hub.fetchTls());
          return res.status === 503 ? await res.text() : undefined;
        },
        30_000,
        200,
      );
      expect(down).toContain("store: writes failing");
    } finally {
      await pg.startServer();
    }
    await eventually(
      "/readyz ok again",
      async () => (await fetch(`${hub.url}/readyz`, hub.fetchTls())).status === 200 || undefined,
      60_000,
      200,
    );
    // The report that waited is in the store once it takes writes again.
    const name = `while-down-${agent.nodeName}`;
    const sql = new SQL(dbUrl, { max: 1 });
    try {
      const stored = await eventually(
        "the pod stored",
        async () =>
          (await sql.unsafe("SELECT 1 FROM pods WHERE pod->'metadata'->>'name' = $1", [name]))
            .length > 0 || undefined,
        30_000,
        200,
      );
      expect(stored).toBe(true);
    } finally {
      await sql.close();
    }
  }, 120_000);
});
