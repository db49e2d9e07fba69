// `fleetlet hub migrate` (docs/hub-replicas.md, "Migration from one hub") with the compiled
// fleetlet: a single hub's data folder, filled through its API and CLI (a join token, a device
// joined and reporting at the protocol level with a pod and an event, a DaemonSet assigned to it,
// a ConfigMap, a Secret, a pushed release, a node update, an agent rollout, the audit records
// those made), is copied into an empty PostgreSQL database; everything loaded back through the
// stores equals what was loaded from SQLite, Secrets stay sealed (under another key when one is
// given), a second copy and a half-filled database are refused, and bad --from and --to say why.
// A replica (`fleetlet hub --store --bus`) started on the copy serves the single hub's own CA
// (made by one start on HTTPS after the fill on plain HTTP), welcomes the device with the
// credential it got from the single hub, and takes the old operator token. NATS is a throwaway
// nats-server (scripts/lib/nats.ts).
// Needs root and Debian's postgresql (scripts/setup installs it): a throwaway cluster of
// PostgreSQL 15 is started for this file (scripts/lib/postgres.ts) and removed after; and
// dist/fleetlet (scripts/build). No test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { SQL } from "bun";
import { type NatsServer, startNatsServer } from "../../scripts/lib/nats.ts";
import { PostgresCluster } from "../../scripts/lib/postgres.ts";
import { loadSealer, SecretSealer } from "../../src/hub/deploy/sealing.ts";
import { type HubSnapshot, loadSnapshot } from "../../src/hub/migrate.ts";
import { openPostgresStores } from "../../src/hub/stores-postgres.ts";
import { type HubStores, openSqliteStores } from "../../src/hub/stores-sqlite.ts";
import { createLogger } from "../../src/util/log.ts";
import { makePod } from "../lib/builders.ts";
import { daemonSetYaml, hubCli, tempManifest } from "../lib/deploy.ts";
import { nodeArch, nodeReport, ProtocolClient, TestHub } from "../lib/hub.ts";
import { eventually, fleetletBin } from "../lib/testbed.ts";
import { makeEvent } from "../unit/hubclient/fixtures.ts";

const quiet = createLogger({ level: "error" });
const dir = mkdtempSync(join(tmpdir(), "hub-migrate-"));
const exe = join(dir, "fleetlet");
const V = "9.9.2-mig";
const NODE = "mig-1";
const hub = new TestHub(["--rollout-interval", "200ms"]);
let cluster: PostgresCluster;
let nats: NatsServer;
/** The device's credential, from its join on the single hub. */
let credential = "";
let fromSqlite: HubSnapshot;

function run(args: string[]) {
  const p = Bun.spawnSync([fleetletBin, ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
}

const migrate = (to: string, ...more: string[]) =>
  run(["hub", "migrate", "--from", hub.dataDir, "--to", to, ...more]);

function apply(yaml: string) {
  const r = hubCli(hub, ["apply", "-f", tempManifest("o.yaml", yaml)]);
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
}

/** A device joined with a join token and reporting its Node, a pod and an event. */
async function device(): Promise<ProtocolClient> {
  const res = await hub.join(await hub.joinToken("1h", { fleet: "mig" }), NODE);
  expect(res.status).toBe(200);
  credential = ((await res.json()) as { credential: string }).credential;
  const c = new ProtocolClient(hub.url, credential);
  await c.opened;
  c.send({
    type: "hello",
    protocolVersion: 1,
    nodeName: NODE,
    agentVersion: "0.1.0",
    streamId: "s1",
    features: ["updates", "desired-pods", "desired-config"],
  });
  await c.waitFor("welcome");
  c.send(nodeReport(NODE));
  const pod = makePod({ name: "cam", uid: "uid-cam", spec: { nodeName: NODE } });
  c.send({ type: "pod.upsert", seq: 2, uid: "uid-cam", pod });
  c.send({ type: "event", seq: 3, event: { ...makeEvent("cam.1"), source: { host: NODE } } });
  await eventually("the device's pod and event on the hub", async () => {
    const pods = await (await hub.api(`/api/v1/pods?nodeName=${NODE}`)).text();
    const events = await (await hub.api("/api/v1/events")).text();
    return pods.includes("uid-cam") && events.includes("cam.1") ? true : undefined;
  });
  return c;
}

/** Fills the single hub through its API and CLI. */
async function fill(): Promise<void> {
  copyFileSync("/usr/bin/true", exe);
  expect(run(["release", "keygen", "--out", join(dir, "ops")]).code).toBe(0);
  expect(run(["release", "sign", "--key", join(dir, "ops.key"), "--version", V, exe]).code).toBe(0);
  expect(hubCli(hub, ["hub", "release", "push", exe, "--signature", `${exe}.sig`])).toMatchObject({
    stderr: "",
    code: 0,
  });
  const c = await device();
  apply(daemonSetYaml({ name: "web", image: "busybox:1.36", nodeSelector: { fleet: "mig" } }));
  apply("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  a: b\n");
  apply("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: pw\n");
  expect(hubCli(hub, ["hub", "update", NODE, "--version", V]).code).toBe(0);
  expect(hubCli(hub, ["hub", "upgrade", "ar", "--version", V, "-l", "fleet=none"]).code).toBe(0);
  await eventually("the DaemonSet's pod sent to the device", () =>
    c.received.some((m) => m.type === "desired" && JSON.stringify(m).includes('"web-'))
      ? true
      : undefined,
  );
  c.close();
}

/** `x` with every list in one order, to compare what two databases hold. */
function sorted(x: HubSnapshot): HubSnapshot {
  const order = <T>(a: T[]) =>
    [...a].sort((p, q) => (JSON.stringify(p) < JSON.stringify(q) ? -1 : 1));
  return {
    fleet: {
      ...x.fleet,
      joinTokens: order(x.fleet.joinTokens),
      nodes: order(x.fleet.nodes),
      pods: order(x.fleet.pods),
      events: order(x.fleet.events),
    },
    deploy: {
      resourceVersion: x.deploy.resourceVersion,
      objects: order(x.deploy.objects),
      revisions: order(x.deploy.revisions),
      rollouts: order(x.deploy.rollouts),
      assignments: order(x.deploy.assignments),
      statuses: order(x.deploy.statuses),
    },
    updates: order(x.updates),
    rollouts: order(x.rollouts),
    audit: x.audit,
  };
}

async function loaded(open: () => Promise<HubStores> | HubStores): Promise<HubSnapshot> {
  const s = await open();
  try {
    return sorted(await loadSnapshot(s));
  } finally {
    await s.hub.close();
  }
}

const ownSealer = () => loadSealer(join(hub.dataDir, "secrets.key"), false).sealer;

/** The stored body of Secret default/db in the database at `url`. */
async function secretRow(url: string): Promise<string> {
  const sql = new SQL(url, { max: 1 });
  try {
    const rows = await sql`SELECT body FROM objects WHERE kind = 'Secret' AND name = 'db'`;
    return String(rows[0]?.body);
  } finally {
    await sql.close();
  }
}

/** Starts the single hub once on its data folder with HTTPS, so that it makes its own CA in
 * DIR/tls (filled on plain HTTP, which the CLI reaches without a CA), and stops it. */
async function startWithOwnCa(): Promise<void> {
  const p = Bun.spawn([fleetletBin, "hub", "--data", hub.dataDir, "--listen", "127.0.0.1:0"], {
    stdout: "pipe",
    stderr: "pipe",
  });
  let output = "";
  void (async () => {
    for await (const c of p.stderr) output += new TextDecoder().decode(c);
  })();
  void (async () => {
    for await (const c of p.stdout) output += new TextDecoder().decode(c);
  })();
  await eventually("the hub on HTTPS to listen", () =>
    output.includes("hub listening") ? true : undefined,
  );
  p.kill("SIGTERM");
  expect(await p.exited).toBe(0);
}

beforeAll(async () => {
  cluster = await PostgresCluster.start();
  nats = await startNatsServer();
  hub.port = 20_000 + Math.floor(Math.random() * 12_000);
  await hub.start();
  await fill();
  await hub.stop();
  await startWithOwnCa();
  fromSqlite = await loaded(() =>
    openSqliteStores(join(hub.dataDir, "hub.db"), ownSealer(), quiet),
  );
}, 120_000);
afterAll(async () => {
  await hub.cleanup();
  await cluster?.remove();
  await nats?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("fleetlet hub migrate (needs root, PostgreSQL and the compiled fleetlet)", () => {
  test("copies every store: what PostgreSQL holds equals what SQLite held; Secrets stay sealed with DIR's key", async () => {
    expect(fromSqlite.fleet.nodes.map((n) => n.name)).toEqual([NODE]);
    expect(fromSqlite.fleet.operatorHash).toBeString();
    expect(fromSqlite.fleet.pods).toHaveLength(1);
    expect(fromSqlite.fleet.events).toHaveLength(1);
    expect(fromSqlite.deploy.objects.map((o) => o.kind).sort()).toEqual([
      "ConfigMap",
      "DaemonSet",
      "Secret",
    ]);
    expect(fromSqlite.deploy.revisions).toHaveLength(1);
    expect(fromSqlite.deploy.assignments).toHaveLength(1);
    expect(fromSqlite.deploy.statuses).toHaveLength(1);
    expect(fromSqlite.updates.map((u) => u.node)).toEqual([NODE]);
    expect(fromSqlite.rollouts.map((r) => r.name)).toEqual(["ar"]);
    expect(fromSqlite.audit.map((a) => a.kind)).toEqual(["release", "update", "agentrollout"]);
    const url = await cluster.createDatabase();
    const r = migrate(url);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("nodes 1, joinTokens 1, pods 1, events 1, objects 3");
    expect(r.stdout).toContain(`Secrets are sealed under ${join(hub.dataDir, "secrets.key")}`);
    const fromPostgres = await loaded(() => openPostgresStores(url, ownSealer(), quiet));
    expect(fromPostgres).toEqual(fromSqlite);
    expect(await secretRow(url)).toStartWith(`sealed:v1:${ownSealer().sealingKeyId}:`);
  });

  test("a replica started on the migrated database serves the hub's CA, takes the device's credential and the operator token", async () => {
    const url = await cluster.createDatabase();
    expect(migrate(url).code).toBe(0);
    const key = join(hub.dataDir, "secrets.key");
    const replica = new TestHub(
      ["--store", url, "--bus", nats.url, "--secrets-key-file", key],
      "127.0.0.1",
      true,
    );
    try {
      await replica.start(30_000);
      expect(replica.caPem).toBe(hub.caPem);
      const c = new ProtocolClient(replica.url, credential, hub.caPem);
      await c.opened;
      c.send({
        type: "hello",
        protocolVersion: 1,
        nodeName: NODE,
        agentVersion: "0.1.0",
        streamId: "s1",
      });
      expect(await c.waitFor("welcome")).toMatchObject({ ackedSeq: 3 });
      c.close();
      const res = await replica.api("/api/v1/namespaces/default/secrets/db", {}, hub.operatorToken);
      expect(res.status).toBe(200);
      const secret = (await res.json()) as { data: { password: string } };
      expect(atob(secret.data.password)).toBe("pw");
      expect((await replica.api("/api/v1/nodes", {}, "flo_not-the-token")).status).toBe(401);
      // The pushed release, copied into PostgreSQL: the same bytes from the replica.
      const release = await replica.api(`/api/v1/releases/${V}/${nodeArch}`, {}, hub.operatorToken);
      expect(release.status).toBe(200);
      const exeBytes = readFileSync(exe);
      const got = gunzipSync(Buffer.from(await release.arrayBuffer()));
      expect(Buffer.compare(got, exeBytes)).toBe(0);
    } finally {
      await replica.cleanup();
    }
  }, 60_000);

  test("a second migrate into the same database is refused, and it is left as it was", async () => {
    const url = await cluster.createDatabase();
    expect(migrate(url).code).toBe(0);
    const again = migrate(url);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("the database already holds a hub's data");
    expect(await loaded(() => openPostgresStores(url, ownSealer(), quiet))).toEqual(fromSqlite);
  });

  test("a database a failed copy left half filled is refused, saying how to start over", async () => {
    const url = await cluster.createDatabase();
    const s = await openPostgresStores(url, undefined, quiet);
    await s.hub.saveJoinToken(fromSqlite.fleet.joinTokens[0] as never);
    await s.hub.close();
    const r = migrate(url);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("the database holds part of a hub's data");
    expect(r.stderr).toContain("drop the database, create it again");
  });

  test("--secrets-key-file with another key: Secrets are sealed again under it", async () => {
    const keyFile = join(dir, "replicas.key");
    writeFileSync(keyFile, `${randomBytes(32).toString("base64")}\n`, { mode: 0o600 });
    const other = loadSealer(keyFile, false).sealer;
    expect(other.sealingKeyId).not.toBe(ownSealer().sealingKeyId);
    const url = await cluster.createDatabase();
    const r = migrate(url, "--secrets-key-file", keyFile);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`Secrets are sealed under ${keyFile}`);
    expect(await secretRow(url)).toStartWith(`sealed:v1:${other.sealingKeyId}:`);
    expect(await loaded(() => openPostgresStores(url, other, quiet))).toEqual(fromSqlite);
    const onlyOld = new SecretSealer([randomBytes(32)]);
    await expect(openPostgresStores(url, onlyOld, quiet)).rejects.toThrow(/sealed with key/);
  });

  test("a bad --from or --to says why and exits 1; a missing flag or another scheme is a usage error (2)", async () => {
    const url = await cluster.createDatabase();
    const none = run(["hub", "migrate", "--from", join(dir, "nowhere"), "--to", url]);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain("no such folder");
    const empty = mkdtempSync(join(dir, "empty-"));
    writeFileSync(join(empty, "secrets.key"), `${randomBytes(32).toString("base64")}\n`);
    const notHub = run(["hub", "migrate", "--from", empty, "--to", url]);
    expect(notHub.code).toBe(1);
    expect(notHub.stderr).toContain("not a hub's data folder (no hub.db)");
    const refused = migrate("postgres://fleetlet@127.0.0.1:1/nothing");
    expect(refused.code).toBe(1);
    expect(refused.stderr).toStartWith("fleetlet: --to postgres://fleetlet@127.0.0.1:1/nothing: ");
    const scheme = migrate("mysql://u@h/db");
    expect(scheme.code).toBe(2);
    expect(scheme.stderr).toContain("want postgres://USER@HOST:PORT/DB");
    const missing = run(["hub", "migrate", "--from", hub.dataDir]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("hub migrate takes --from DIR and --to URL");
    expect(run(["hub", "--help"]).stdout).toContain(
      "fleetlet hub migrate --from DIR --to postgres://",
    );
  }, 30_000);
});
