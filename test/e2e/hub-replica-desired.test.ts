// Two compiled replicas (`fleetlet hub --store … --bus …`, docs/hub-replicas.md, "Singletons") on
// a real PostgreSQL and nats-server, with the leader apart from the replica that holds a device:
// A leads and runs the DaemonSet passes, the compiled agent is connected to B only. A DaemonSet
// applied at A reaches the device through B, so does its rollout to a new image, and the device's
// desired generation stops moving once it runs (no replica raises it again and again), also when
// the agent is started again and welcomed at B. B serves the status and the rollout view the
// leader's passes decided. Needs root, the test bed (containerd), Debian's
// postgresql and nats-server, and scripts/build.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SQL } from "bun";
import { type NatsServer, startNatsServer } from "../../scripts/lib/nats.ts";
import { PostgresCluster } from "../../scripts/lib/postgres.ts";
import type { DaemonSetStatus } from "../../src/api/daemonset.ts";
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import { daemonSetYaml, tempManifest } from "../lib/deploy.ts";
import { TestHub } from "../lib/hub.ts";
import { startReplica } from "../lib/replicas.ts";
import { eventually, fleetletBin } from "../lib/testbed.ts";

let pg: PostgresCluster;
let nats: NatsServer;
let db: SQL | undefined;
const dir = mkdtempSync(join(tmpdir(), "fleetlet-replica-desired-"));
const keyFile = join(dir, "secrets.key");
const hubs: TestHub[] = [];
const LEADING = "leading: this replica runs the hub's singletons";

function replica(url: string, id: string): TestHub {
  const args = ["--store", url, "--bus", nats.url, "--secrets-key-file", keyFile];
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
  await db?.close();
  for (const h of hubs) await h.cleanup();
  await nats?.stop();
  await pg?.remove();
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

/** `fleetlet ARGS` against replica `hub`, trusting the replicas' CA. */
function cli(hub: TestHub, args: string[]) {
  const ca = join(hub.dataDir, "tls", "ca.crt");
  const r = Bun.spawnSync(
    [fleetletBin, ...args, "--hub", hub.url, "--token", hub.operatorToken, "--ca-file", ca],
    { stdout: "pipe", stderr: "pipe" },
  );
  return { code: r.exitCode, output: r.stdout.toString() + r.stderr.toString() };
}

/** The device's desired generation as stored (the node's row). */
async function storedGeneration(node: string): Promise<number> {
  const rows = (await db?.unsafe(
    "SELECT progress->>'desiredGeneration' AS g FROM nodes WHERE name = $1",
    [node],
  )) as { g: string }[];
  return Number(rows[0]?.g);
}

function runs(pod: Pod, image: string): boolean {
  const c = pod.status?.containerStatuses?.[0];
  return pod.spec.containers[0]?.image === image && c?.state?.running !== undefined;
}

test("a DaemonSet applied at the leader reaches a device held by the other replica, and so does its rollout", async () => {
  const url = await pg.createDatabase();
  db = new SQL(url, { max: 1 });
  const [a, b] = [replica(url, "des-a"), replica(url, "des-b")] as [TestHub, TestHub];
  await startReplica(a);
  await eventually("replica a to lead", () => (a.output.includes(LEADING) ? true : undefined));
  await startReplica(b);
  const agent = new TestAgent({ args: [] });
  try {
    const token = await b.joinToken("1h", { site: "d" });
    // The agent knows only B: B holds the node, A runs the passes.
    agent.args.push(
      ...["--hub", b.url, "--join-token", token, "--node-status-update-frequency", "1s"],
    );
    await agent.start();
    await eventually(
      "the node at a, from the change log",
      async () => (await a.api(`/api/v1/nodes/${agent.nodeName}`)).status === 200 || undefined,
      30_000,
    );
    const img = agent.tb.busybox;
    const img2 = agent.tb.busyboxV2;
    const v = (image: string) => daemonSetYaml({ name: "app", image, nodeSelector: { site: "d" } });
    expect(cli(a, ["apply", "-f", tempManifest("app.yaml", v(img))])).toMatchObject({ code: 0 });
    await agent.waitPod("app", `running ${img}`, (p) => runs(p, img), 60_000);
    expect(cli(a, ["apply", "-f", tempManifest("app.yaml", v(img2))])).toMatchObject({ code: 0 });
    await agent.waitPod("app", `running ${img2}`, (p) => runs(p, img2), 60_000);
    expect(b.output).not.toContain(LEADING);
    // B does not lead: it serves the DaemonSet with the status A stored, and the rollout view
    // with A's phase; `rollout status` ends at B as at A.
    const path = "/apis/apps/v1/namespaces/default/daemonsets/app";
    const status = async (h: TestHub) =>
      ((await (await h.api(path)).json()) as { status?: DaemonSetStatus }).status;
    await eventually(
      "the rollout's status at b",
      async () => {
        const s = await status(b);
        const done = s?.observedGeneration === 2 && s.updatedNumberScheduled === 1;
        return done && s.numberAvailable === 1 ? true : undefined;
      },
      30_000,
    );
    expect(await status(b)).toEqual(await status(a));
    const view = await (await b.api(`${path}/rollout`)).json();
    expect(view).toMatchObject({
      phase: "Complete",
      devices: [{ name: agent.nodeName, revision: 2, running: 2, state: "Updated" }],
    });
    expect(view).toEqual(await (await a.api(`${path}/rollout`)).json());
    const rollout = cli(b, ["rollout", "status", "daemonset/app", "--timeout", "20s"]);
    expect(rollout).toMatchObject({ code: 0 });
    expect(rollout.output).toContain("successfully rolled out");
    // Once the device runs it, its generation stays where it is.
    const first = await storedGeneration(agent.nodeName);
    await Bun.sleep(4000);
    const second = await storedGeneration(agent.nodeName);
    console.log(`desired generation ${first}, then ${second} 4 s later`);
    expect(first).toBeGreaterThanOrEqual(2);
    expect(second).toBe(first);
    const pod = (await agent.pod("app")) as Pod;
    expect(runs(pod, img2)).toBe(true);
    // Started again, the agent is welcomed at B (which does not lead) with the generation it
    // runs: B reads the store first, raises nothing, and the device keeps its container.
    await agent.stop("SIGKILL");
    await agent.start();
    await eventually(
      "the agent connected to b again",
      () => agent.output.includes("connected to the hub") || undefined,
      30_000,
    );
    await Bun.sleep(3000);
    expect(await storedGeneration(agent.nodeName)).toBe(first);
    const after = await agent.waitPod("app", `running ${img2}`, (p) => runs(p, img2), 30_000);
    const id = (p: Pod) => p.status?.containerStatuses?.[0]?.containerID;
    expect(id(after)).toBe(id(pod));
  } finally {
    await agent.cleanup();
    await Promise.all([a.stop(), b.stop()]);
  }
}, 240_000);
