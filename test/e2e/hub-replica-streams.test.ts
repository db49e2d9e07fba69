// Logs, exec, attach and port-forward at one hub replica to a device whose agent is connected to
// another (docs/hub-replicas.md, "Streams across replicas"): two compiled replicas on one
// PostgreSQL and one nats-server (B started before the device joined, so it has the pod from
// the change log), a compiled agent on replica A with a running pod, and every stream asked of
// replica B with `fleetlet … --hub B` and the Kubernetes API's log GET; what an unknown pod and
// an offline node answer; and a stream across replicas after nats-server restarted. Real PostgreSQL (scripts/lib/postgres.ts), nats-server (scripts/lib/nats.ts) and
// containerd. Needs root, the test bed and scripts/build.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type NatsServer, startNatsServer } from "../../scripts/lib/nats.ts";
import { PostgresCluster } from "../../scripts/lib/postgres.ts";
import { TestAgent } from "../lib/agent.ts";
import { TestHub } from "../lib/hub.ts";
import { Background, run } from "../lib/processes.ts";
import { startReplica } from "../lib/replicas.ts";
import { eventually, fleetletBin } from "../lib/testbed.ts";

let pg: PostgresCluster;
let nats: NatsServer;
const dir = mkdtempSync(join(tmpdir(), "fleetlet-replica-streams-e2e-"));
const keyFile = join(dir, "secrets.key");
const agentArgs = [
  ...["--hub-reconnect-back-off-base", "200ms", "--hub-reconnect-back-off-max", "1s"],
  ...["--node-status-update-frequency", "1s"],
];
const agent = new TestAgent({ args: agentArgs });
let holder: TestHub;
let other: TestHub;
/** FLEETLET_HUB_TOKEN and FLEETLET_HUB_CA (the replicas share both). */
let env: Record<string, string> = {};
const pod = () => `web-${agent.nodeName}`;

const manifest = (img: string) => `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: main
      image: ${img}
      command: ["sh", "-c", "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.3; done"]
    - name: http
      image: ${img}
      command: ["sh", "-c", "mkdir -p /srv && exec httpd -f -p 8080 -h /srv"]
`;

/** A replica on database `url`, HTTPS with the store's CA. */
function replica(url: string, id: string): TestHub {
  const args = ["--store", url, "--bus", nats.url, "--secrets-key-file", keyFile];
  return new TestHub(
    [...args, "--replica-id", id, "--heartbeat-interval", "1s"],
    "127.0.0.1",
    true,
  );
}

/** `fleetlet COMMAND --hub <replica B> ARGS` (before exec's `--`). */
const atOther = ([command, ...args]: string[], stdin?: string) =>
  run([fleetletBin, command as string, "--hub", other.url, ...args], {
    env,
    ...(stdin !== undefined && { stdin }),
  });

beforeAll(async () => {
  pg = await PostgresCluster.start();
  nats = await startNatsServer();
  writeFileSync(keyFile, `${Buffer.alloc(32, 9).toString("base64")}\n`, { mode: 0o600 });
  const url = await pg.createDatabase();
  holder = replica(url, "hub-a");
  await startReplica(holder);
  // B starts before the device joins and its pod exists: B has both from the change log.
  other = replica(url, "hub-b");
  await startReplica(other);
  agentArgs.push("--hub", holder.url, "--join-token", await holder.joinToken());
  agent.writeManifest("web.yaml", manifest(agent.tb.busybox));
  await agent.start();
  await holder.runningPod(agent.nodeName, "web");
  await other.runningPod(agent.nodeName, "web");
  // The tests ask for the last three lines of output: wait (at A) until there are three.
  await eventually(
    "three lines of the container's output",
    async () => {
      const res = await holder.api(`/api/v1/namespaces/default/pods/${pod()}/log?container=main`);
      return res.status === 200 && (await res.text()).split("\n").length > 3 ? true : undefined;
    },
    30_000,
    200,
  );
  env = { FLEETLET_HUB_TOKEN: other.operatorToken, FLEETLET_HUB_CA: join(dir, "ca.crt") };
  writeFileSync(env.FLEETLET_HUB_CA as string, other.caPem);
}, 120_000);

afterAll(async () => {
  await agent.cleanup();
  for (const h of [holder, other]) await h?.cleanup();
  await nats?.stop();
  await pg?.remove();
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

/** Exec at B: `echo` of stdin through cat, with the exit code given. */
async function echoAtOther(text: string) {
  return atOther(["exec", "-i", pod(), "-c", "main", "--", "sh", "-c", "cat; exit 3"], text);
}

describe("streams at a replica to a device held by another (needs root and the test bed)", () => {
  test("logs: fleetlet logs and the API's log GET at B show the container's output", async () => {
    const logs = await atOther(["logs", pod(), "-c", "main", "--tail", "3"]);
    expect(logs.code).toBe(0);
    expect(logs.stdout).toMatch(/^(tick \d+\n){3}$/);
    const res = await other.api(`/api/v1/namespaces/default/pods/${pod()}/log?container=main`);
    expect(res.status).toBe(200);
    expect(await res.text()).toMatch(/^tick 0\ntick 1\n/);
  }, 30_000);

  test("exec at B echoes stdin and returns the command's exit code", async () => {
    const r = await echoAtOther("hello across replicas\n");
    expect(r.stdout).toBe("hello across replicas\n");
    expect(r.code).toBe(3);
  }, 30_000);

  test("attach at B streams the running process's output", async () => {
    const bg = new Background(
      [fleetletBin, "attach", "--hub", other.url, pod(), "-c", "main"],
      env,
    );
    try {
      const first = Number((await bg.waitFor(/tick (\d+)/, "a first line"))[1]);
      await bg.waitFor(new RegExp(`tick ${first + 2}\\b`), "two lines more");
    } finally {
      await bg.stop();
    }
  }, 30_000);

  test("port-forward at B carries 8 MiB from httpd in the pod, intact", async () => {
    const made = await atOther([
      ...["exec", pod(), "-c", "http", "--", "sh", "-c"],
      "head -c 8388608 /dev/urandom > /srv/blob && sha256sum /srv/blob",
    ]);
    expect(made.code).toBe(0);
    const want = made.stdout.split(/\s+/)[0];
    expect(want).toMatch(/^[0-9a-f]{64}$/);
    const pf = new Background(
      [fleetletBin, "port-forward", pod(), "0:8080", "--hub", other.url],
      env,
    );
    try {
      const port = (
        await pf.waitFor(/Forwarding from 127\.0\.0\.1:(\d+) -> 8080/, "the forward")
      )[1];
      const body = new Uint8Array(
        await (await fetch(`http://127.0.0.1:${port}/blob`)).arrayBuffer(),
      );
      expect(body.length).toBe(8 * 1024 * 1024);
      expect(createHash("sha256").update(body).digest("hex")).toBe(want as string);
    } finally {
      await pf.stop();
    }
  }, 60_000);

  test("an unknown pod at B is 404, as before", async () => {
    const res = await other.api("/api/v1/namespaces/default/pods/nope/log");
    expect(res.status).toBe(404);
  });

  test("after nats-server restarted, a new stream at B reaches the device again", async () => {
    await nats.restart();
    // Both replicas reconnect with their backoff (250 ms doubling); until then an exec is refused.
    const r = await eventually(
      "an exec across replicas after the restart",
      async () => {
        const e = await echoAtOther("after restart\n");
        return e.code === 3 ? e : undefined;
      },
      30_000,
      500,
    );
    expect(r.stdout).toBe("after restart\n");
    // The holder's connection was lost and made again (its subscriptions with it).
    expect(holder.output).toContain("reconnected to NATS");
  }, 60_000);

  test("with the holder stopped, the node is offline at B: 503 naming it", async () => {
    await holder.stop();
    const res = await other.api(`/api/v1/namespaces/default/pods/${pod()}/log?container=main`);
    expect(res.status).toBe(503);
    expect(((await res.json()) as { message: string }).message).toBe(
      `node "${agent.nodeName}" is offline: no hub replica holds it`,
    );
    const e = await echoAtOther("x");
    expect(e.code).not.toBe(0);
    expect(e.stderr).toContain("no hub replica holds it");
  }, 30_000);
});
