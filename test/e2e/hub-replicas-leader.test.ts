// Two compiled replicas (`fleetlet hub --store … --bus …`, docs/hub-replicas.md) on a real
// PostgreSQL and nats-server: a release pushed at one is downloaded from the other with the same
// bytes (releases stored in PostgreSQL); one replica leads and runs the deployer; when it is
// killed with SIGKILL another takes the lead within 15 s and goes on with the DaemonSet applied
// under the first (loaded from the store), and a DaemonSet rollout of three compiled agents
// started under the first goes on at the other with no device updated twice; a serving certificate renewed near its end at one is
// served by both (written back to the store). Needs root, Debian's postgresql and nats-server, and
// scripts/build.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "node:tls";
import { gunzipSync } from "node:zlib";
import { type NatsServer, startNatsServer } from "../../scripts/lib/nats.ts";
import { PostgresCluster } from "../../scripts/lib/postgres.ts";
import type { DaemonSet } from "../../src/api/daemonset.ts";
import { TestAgent } from "../lib/agent.ts";
import { daemonSetYaml, rolloutView, tempManifest } from "../lib/deploy.ts";
import { nodeArch, TestHub } from "../lib/hub.ts";
import { startReplica } from "../lib/replicas.ts";
import { eventually, fleetletBin } from "../lib/testbed.ts";

let pg: PostgresCluster;
let nats: NatsServer;
const dir = mkdtempSync(join(tmpdir(), "fleetlet-replicas-leader-"));
const keyFile = join(dir, "secrets.key");
const hubs: TestHub[] = [];
const LEADING = "leading: this replica runs the hub's singletons";

function replica(url: string, id: string, more: string[] = []): TestHub {
  const args = ["--store", url, "--bus", nats.url, "--secrets-key-file", keyFile, ...more];
  const hub = new TestHub(
    [...args, "--replica-id", id, "--leader-interval", "500ms", "--rollout-interval", "300ms"],
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

function run(args: string[]) {
  const r = Bun.spawnSync([fleetletBin, ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode, output: r.stdout.toString() + r.stderr.toString() };
}

/** `fleetlet ARGS` against replica `hub`, trusting the replicas' CA. */
function cli(hub: TestHub, args: string[]) {
  const ca = join(hub.dataDir, "tls", "ca.crt");
  return run([...args, "--hub", hub.url, "--token", hub.operatorToken, "--ca-file", ca]);
}

test("a release pushed at one replica is downloaded from another with the same bytes", async () => {
  const url = await pg.createDatabase();
  const [a, b] = [replica(url, "rel-a"), replica(url, "rel-b")] as [TestHub, TestHub];
  await startReplica(a);
  await startReplica(b);
  // An executable of several 1 MiB chunks once compressed: a real ELF header, random bytes after.
  const exe = join(dir, "fleetlet-rel");
  const bytes = Buffer.concat([readFileSync("/usr/bin/true"), randomBytes(3 * 1024 * 1024)]);
  writeFileSync(exe, bytes, { mode: 0o755 });
  const V = "9.9.3-rep";
  expect(run(["release", "keygen", "--out", join(dir, "ops")]).code).toBe(0);
  expect(run(["release", "sign", "--key", join(dir, "ops.key"), "--version", V, exe]).code).toBe(0);
  expect(cli(a, ["hub", "release", "push", exe, "--signature", `${exe}.sig`])).toMatchObject({
    code: 0,
  });
  expect(cli(b, ["hub", "release", "list"]).output).toContain(V);
  const res = await b.api(`/api/v1/releases/${V}/${nodeArch}`);
  expect(res.status).toBe(200);
  expect(res.headers.get("x-fleetlet-release-sha256")).toBe(
    new Bun.CryptoHasher("sha256").update(bytes).digest("hex"),
  );
  const gz = Buffer.from(await res.arrayBuffer());
  expect(Buffer.compare(gunzipSync(gz), bytes)).toBe(0);
  const range = await b.api(`/api/v1/releases/${V}/${nodeArch}`, {
    headers: { range: "bytes=1048570-1048589" },
  });
  expect(range.status).toBe(206);
  expect(
    Buffer.compare(Buffer.from(await range.arrayBuffer()), gz.subarray(1048570, 1048590)),
  ).toBe(0);
  const manifest = await b.api(`/api/v1/releases/${V}/${nodeArch}/manifest`);
  expect(await manifest.text()).toBe(readFileSync(`${exe}.sig`, "utf8"));
  await Promise.all([a.stop(), b.stop()]);
}, 120_000);

test("one replica leads; killed with SIGKILL, another leads within 15 s and goes on with its DaemonSet", async () => {
  const url = await pg.createDatabase();
  const [a, b] = [replica(url, "lead-a"), replica(url, "lead-b")] as [TestHub, TestHub];
  await startReplica(a);
  await eventually("replica a to lead", () => (a.output.includes(LEADING) ? true : undefined));
  await startReplica(b);
  const yaml = daemonSetYaml({ name: "web", image: "busybox:1.36", nodeSelector: { x: "y" } });
  expect(cli(a, ["apply", "-f", tempManifest("ds.yaml", yaml)])).toMatchObject({ code: 0 });
  const path = "/apis/apps/v1/namespaces/default/daemonsets/web";
  await eventually("the DaemonSet's status at a", async () => {
    const ds = (await (await a.api(path)).json()) as DaemonSet;
    return ds.status?.observedGeneration === 1 ? true : undefined;
  });
  await Bun.sleep(1500);
  expect(b.output).not.toContain(LEADING);
  // b started before the DaemonSet was applied at a, and has it from the change log.
  const atA = (await (await a.api(path)).json()) as DaemonSet;
  const atB = await eventually("the DaemonSet at b, from the change log", async () => {
    const res = await b.api(path);
    return res.status === 200 ? ((await res.json()) as DaemonSet) : undefined;
  });
  expect(atB.metadata.uid).toBe(atA.metadata.uid);
  expect(atB.metadata.resourceVersion).toBe(atA.metadata.resourceVersion);
  const from = performance.now();
  await a.kill();
  await eventually(
    "replica b to lead",
    () => (b.output.includes(LEADING) ? true : undefined),
    20_000,
  );
  const took = performance.now() - from;
  console.log(`replica b led ${Math.round(took)} ms after replica a was killed`);
  expect(took).toBeLessThan(15_000);
  const ds = await eventually("the DaemonSet at b, with the status of its rollout", async () => {
    const res = await b.api(path);
    if (res.status !== 200) return undefined;
    const d = (await res.json()) as DaemonSet;
    return d.status?.observedGeneration === 1 ? d : undefined;
  });
  expect(ds.metadata.generation).toBe(1);
  await b.stop();
}, 120_000);

/** The serial number of the certificate a new TLS connection to `hub` is served. */
function servedSerial(hub: TestHub): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(
      { host: "127.0.0.1", port: Number(new URL(hub.url).port), ca: hub.caPem },
      () => {
        resolve(s.getPeerCertificate().serialNumber);
        s.end();
      },
    );
    s.on("error", reject);
  });
}

test("a serving certificate renewed near its end at one replica is served by every replica", async () => {
  const url = await pg.createDatabase();
  const timing = ["--serving-cert-lifetime", "45s", "--serving-cert-check-interval", "1s"];
  const [a, b] = [replica(url, "tls-a", timing), replica(url, "tls-b", timing)] as [
    TestHub,
    TestHub,
  ];
  await startReplica(a);
  await startReplica(b);
  const first = await servedSerial(a);
  expect(await servedSerial(b)).toBe(first);
  // Renewed in its last third (15 s before its end) by whichever checks first, then served by both.
  const renewed = await eventually(
    "both replicas serving one renewed certificate",
    async () => {
      const [x, y] = [await servedSerial(a), await servedSerial(b)];
      return x !== first && x === y ? x : undefined;
    },
    40_000,
  );
  expect(renewed).not.toBe(first);
  await Promise.all([a.stop(), b.stop()]);
}, 120_000);

test("a DaemonSet rollout started under one replica goes on at another after the first is SIGKILLed, no device updated twice", async () => {
  const url = await pg.createDatabase();
  const [a, b] = [replica(url, "roll-a"), replica(url, "roll-b")] as [TestHub, TestHub];
  b.port = 20_000 + Math.floor(Math.random() * 10_000);
  await startReplica(a);
  await eventually("replica a to lead", () => (a.output.includes(LEADING) ? true : undefined));
  // The agents list both replicas; b is not up yet, so they connect to a.
  const argLists: string[][] = [[], [], []];
  const agents = argLists.map((args) => new TestAgent({ args }));
  try {
    for (const [i, agent] of agents.entries()) {
      const token = await a.joinToken("1h", { site: "r" });
      argLists[i]?.push(
        ...["--hub", `${a.url},https://127.0.0.1:${b.port}`, "--join-token", token],
        ...["--hub-reconnect-back-off-base", "200ms", "--hub-reconnect-back-off-max", "1s"],
        ...["--node-status-update-frequency", "1s"],
      );
      await agent.start();
    }
    const img = agents[0]?.tb.busybox ?? "";
    const img2 = agents[0]?.tb.busyboxV2 ?? "";
    const v = (image: string) =>
      daemonSetYaml({ name: "app", image, nodeSelector: { site: "r" }, minReadySeconds: 4 });
    expect(cli(a, ["apply", "-f", tempManifest("app.yaml", v(img))])).toMatchObject({ code: 0 });
    await eventually(
      "v1 rolled out at a",
      async () => {
        const view = await rolloutView(a, "app");
        return view.phase === "Complete" && view.devices.length === 3 ? view : undefined;
      },
      90_000,
    );
    // b starts now (it loads the devices and v1), then v2 is applied at a.
    await startReplica(b);
    expect(cli(a, ["apply", "-f", tempManifest("app.yaml", v(img2))])).toMatchObject({ code: 0 });
    const updated = await eventually(
      "the canary updated at a",
      async () => {
        const view = await rolloutView(a, "app");
        const done = view.devices.filter((d) => d.state === "Updated").map((d) => d.name);
        return done.length >= 1 && done.length < 3 ? done : undefined;
      },
      60_000,
      50,
    );
    const before = new Map<string, string | undefined>();
    for (const agent of agents)
      before.set(
        agent.nodeName,
        (await agent.pod("app"))?.status?.containerStatuses?.[0]?.containerID,
      );
    console.log(`a killed with ${updated.length} of 3 devices on v2`);
    await a.kill();
    await eventually("replica b to lead", () => (b.output.includes(LEADING) ? true : undefined));
    await eventually(
      "v2 rolled out at b",
      async () => {
        const view = await rolloutView(b, "app").catch(() => undefined);
        return view?.phase === "Complete" && view.updateRevision === 2 ? view : undefined;
      },
      90_000,
      200,
    );
    for (const agent of agents) {
      const pod = await agent.pod("app");
      expect(pod?.spec.containers[0]?.image).toBe(img2);
      // The devices updated under a kept their v2 container: their step was not done again.
      if (updated.includes(agent.nodeName))
        expect(pod?.status?.containerStatuses?.[0]?.containerID).toBe(before.get(agent.nodeName));
    }
  } finally {
    await Promise.all(agents.map((x) => x.cleanup()));
  }
}, 300_000);
