// Exec and port-forward across hub replicas: two compiled replicas (`--store postgres://…
// --bus nats://…`) on a throwaway PostgreSQL and nats-server (scripts/lib/postgres.ts, nats.ts),
// a real agent and containerd; the agent is connected to replica A, and every stream is asked of
// A (the holder, directly) and of B (relayed to A through NATS). Prints, against the targets of
// docs/hub-replicas.md:
//   - exec round trip: one byte sent to `cat` in the pod until it comes back, on one exec stream
//     through A and one through B, alternating a round of each over --rounds rounds (after 5
//     warm-up rounds each); p50 and p90 of each, and of B's minus A's per round (target: ≤ 5 ms
//     added);
//   - port-forward throughput: a --mb MB file downloaded from httpd in the pod through
//     `fleetlet port-forward --hub A` and `--hub B`, alternating, best of 3 each (target across
//     replicas ≥ 30 MB/s).
// Needs root, the test bed, postgresql and nats-server, and scripts/build.
//   node_modules/.bin/bun scripts/bench/hub-replica-streams.ts [--rounds 300] [--mb 100]
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectWebSocket } from "../../src/util/ws-client.ts";
import { TestAgent } from "../../test/lib/agent.ts";
import { TestHub } from "../../test/lib/hub.ts";
import { Background } from "../../test/lib/processes.ts";
import { fleetletBin } from "../../test/lib/testbed.ts";
import { startNatsServer } from "../lib/nats.ts";
import { PostgresCluster } from "../lib/postgres.ts";

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i > 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isInteger(v) || v <= 0) {
    console.error(`usage: hub-replica-streams.ts [--rounds N] [--mb N]; bad --${name}`);
    process.exit(2);
  }
  return v;
}
const ROUNDS = arg("rounds", 300);
const MB = arg("mb", 100);
const WARMUP = 5;

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
}
const fmt = (x: number) => x.toFixed(2);

const manifest = (img: string) => `apiVersion: v1
kind: Pod
metadata: {name: bench}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: cat
      image: ${img}
      command: ["sleep", "3600"]
    - name: http
      image: ${img}
      command: ["sh", "-c", "mkdir -p /www && dd if=/dev/urandom of=/www/big bs=1M count=${MB} 2>/dev/null && httpd -f -p 8080 -h /www"]
`;

/** An exec of `cat` through `hub`; each call of the result is one round trip of one byte (ms). */
async function execEcho(
  hub: TestHub,
  pod: string,
): Promise<{ round(): Promise<number>; close(): void }> {
  const q = "command=cat&container=cat&stdin=true&stdout=true&stderr=false";
  const ws = await connectWebSocket({
    url: `${hub.url.replace(/^http/, "ws")}/api/v1/namespaces/default/pods/${pod}/exec?${q}`,
    protocols: ["v5.channel.k8s.io"],
    headers: { authorization: `Bearer ${hub.operatorToken}` },
    ca: hub.caPem,
  });
  let echoed = 0;
  let sent = 0;
  let back: (() => void) | undefined;
  ws.onMessage((d) => {
    if (d[0] !== 1) return;
    echoed += d.length - 1;
    back?.();
  });
  return {
    async round() {
      const t0 = performance.now();
      sent++;
      await new Promise<void>((resolve) => {
        back = () => {
          if (echoed >= sent) resolve();
        };
        ws.send(Uint8Array.of(0, 0x61));
      });
      return performance.now() - t0;
    },
    close() {
      ws.send(Uint8Array.of(255, 0));
      ws.close();
    },
  };
}

/** A `fleetlet port-forward --hub` through `hub`, and one download of /big through it (MB/s). */
async function forward(hub: TestHub, pod: string, env: Record<string, string>) {
  const pf = new Background([fleetletBin, "port-forward", pod, "0:8080", "--hub", hub.url], env);
  const port = (await pf.waitFor(/Forwarding from 127\.0\.0\.1:(\d+) -> 8080/, "the forward"))[1];
  return {
    async download(): Promise<number> {
      const t0 = performance.now();
      const bytes = (await (await fetch(`http://127.0.0.1:${port}/big`)).arrayBuffer()).byteLength;
      if (bytes !== MB * 1024 * 1024) throw new Error(`downloaded ${bytes} bytes, not ${MB} MiB`);
      return bytes / 1e6 / ((performance.now() - t0) / 1000);
    },
    stop: () => pf.stop(),
  };
}

async function execFigures(a: TestHub, b: TestHub, pod: string): Promise<void> {
  const [viaA, viaB] = [await execEcho(a, pod), await execEcho(b, pod)];
  const ta: number[] = [];
  const tb: number[] = [];
  const diff: number[] = [];
  for (let i = 0; i < ROUNDS + WARMUP; i++) {
    const x = await viaA.round();
    const y = await viaB.round();
    if (i < WARMUP) continue;
    ta.push(x);
    tb.push(y);
    diff.push(y - x);
  }
  viaA.close();
  viaB.close();
  const line = (what: string, xs: number[]) =>
    `${what}: p50 ${fmt(pct(xs, 50))} ms, p90 ${fmt(pct(xs, 90))} ms`;
  console.log(`exec round trip, one byte (${ROUNDS} rounds each, alternating)`);
  console.log(`  ${line("at the holder (A)", ta)}`);
  console.log(`  ${line("at the other replica (B)", tb)}`);
  console.log(
    `  ${line("added across replicas (B − A per round)", diff)}; target p50 ≤ 5 ms: ${pct(diff, 50) <= 5 ? "yes" : "no"}`,
  );
}

async function forwardFigures(a: TestHub, b: TestHub, pod: string, env: Record<string, string>) {
  const [fa, fb] = [await forward(a, pod, env), await forward(b, pod, env)];
  let [bestA, bestB] = [0, 0];
  try {
    for (let i = 0; i < 3; i++) {
      bestA = Math.max(bestA, await fa.download());
      bestB = Math.max(bestB, await fb.download());
    }
  } finally {
    await fa.stop();
    await fb.stop();
  }
  console.log(`port-forward throughput (fleetlet port-forward, ${MB} MiB, best of 3 each)`);
  console.log(`  at the holder (A): ${fmt(bestA)} MB/s`);
  console.log(
    `  at the other replica (B): ${fmt(bestB)} MB/s; target ≥ 30 MB/s: ${bestB >= 30 ? "yes" : "no"}`,
  );
}

const dir = mkdtempSync(join(tmpdir(), "fleetlet-bench-replicas-"));
const pg = await PostgresCluster.start();
const nats = await startNatsServer();
const keyFile = join(dir, "secrets.key");
writeFileSync(keyFile, `${Buffer.alloc(32, 3).toString("base64")}\n`, { mode: 0o600 });
const url = await pg.createDatabase();
const replica = (id: string) =>
  new TestHub(
    ["--store", url, "--bus", nats.url, "--secrets-key-file", keyFile, "--replica-id", id],
    "127.0.0.1",
    true,
  );
const [a, b] = [replica("hub-a"), replica("hub-b")];
const args: string[] = ["--log-level", "warn"];
const agent = new TestAgent({ args });
try {
  for (const hub of [a, b]) {
    await hub.start(30_000);
    hub.operatorToken = readFileSync(join(hub.dataDir, "operator-token"), "utf8").trim();
  }
  args.push("--hub", a.url, "--join-token", await a.joinToken());
  agent.writeManifest("bench.yaml", manifest(agent.tb.busybox));
  await agent.start();
  await a.runningPod(agent.nodeName, "bench");
  // B does not yet follow A's changes: started again, it loads the pod from the store.
  await b.stop();
  await b.start(30_000);
  await b.runningPod(agent.nodeName, "bench");
  await Bun.sleep(3000); // httpd starts after the file is written
  const pod = `bench-${agent.nodeName}`;
  await execFigures(a, b, pod);
  const env = { FLEETLET_HUB_TOKEN: a.operatorToken, FLEETLET_HUB_CA: join(dir, "ca.crt") };
  writeFileSync(env.FLEETLET_HUB_CA, a.caPem);
  await forwardFigures(a, b, pod, env);
} finally {
  await agent.cleanup();
  await a.cleanup();
  await b.cleanup();
  await nats.stop();
  await pg.remove();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(0);
