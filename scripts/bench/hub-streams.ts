// Logs, exec and port-forward through the hub on loopback (HTTPS with the hub's own CA, as it runs
// by default): a real agent, containerd and the compiled hub. Prints, against the targets:
//   - logs -f line latency: from the runtime's timestamp of a line (timestamps=true) to the
//     moment the client reads it through the hub; p50 and p90 over --lines lines;
//   - exec round trip: one byte sent to `cat` in the pod through the hub until it comes back;
//     p50 and p90 over --rounds rounds (after 5 warm-up rounds);
//   - port-forward throughput: a --mb MB file downloaded from httpd in the pod through
//     `fleetlet port-forward --hub` (and kubectl's, when kubectl is installed); best of 3; and
//     exec round trips on another stream of the same device during the first download;
//   - the agent's CPU with --follows concurrent `logs -f` of one container writing 10 lines/s,
//     beside its CPU with none, each over --window seconds (from /proc/<pid>/stat).
// Needs root and the test bed.
//   node_modules/.bin/bun scripts/bench/hub-streams.ts [--lines 200] [--rounds 200] [--mb 200] [--follows 100] [--window 10]
import { join } from "node:path";
import { connectWebSocket } from "../../src/util/ws-client.ts";
import { TestAgent } from "../../test/lib/agent.ts";
import { TestHub } from "../../test/lib/hub.ts";
import { Background } from "../../test/lib/processes.ts";
import { fleetletBin } from "../../test/lib/testbed.ts";

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i > 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isFinite(v) || v <= 0) {
    console.error(`usage: hub-streams.ts [--${name} N]`);
    process.exit(2);
  }
  return v;
}
const LINES = arg("lines", 200);
const ROUNDS = arg("rounds", 200);
const MB = arg("mb", 200);
const FOLLOWS = arg("follows", 100);
const WINDOW = arg("window", 10);

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
}

const hub = new TestHub([], "127.0.0.1", true);
const args: string[] = ["--log-level", "warn"];
const agent = new TestAgent({ args });
const podName = () => `bench-${agent.nodeName}`;
const podPath = () => `/api/v1/namespaces/default/pods/${podName()}`;

const manifest = (img: string) => `apiVersion: v1
kind: Pod
metadata: {name: bench}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: ticker
      image: ${img}
      command: ["sh", "-c", "while true; do echo tick; sleep 0.1; done"]
    - name: cat
      image: ${img}
      command: ["sleep", "3600"]
    - name: http
      image: ${img}
      command: ["sh", "-c", "mkdir -p /www && dd if=/dev/urandom of=/www/big bs=1M count=${MB} 2>/dev/null && httpd -f -p 8080 -h /www"]
`;

/** Line latency of logs -f: the runtime's timestamp of each line to its arrival here. */
async function logLatency(): Promise<number[]> {
  const res = await hub.api(
    `${podPath()}/log?container=ticker&follow=true&timestamps=true&tailLines=0`,
  );
  const reader = res.body?.getReader();
  if (reader === undefined) throw new Error(`logs: HTTP ${res.status}`);
  const out: number[] = [];
  let pending = "";
  const decoder = new TextDecoder();
  while (out.length < LINES) {
    const { value, done } = await reader.read();
    if (done) break;
    const now = Date.now();
    pending += decoder.decode(value, { stream: true });
    for (let nl = pending.indexOf("\n"); nl >= 0; nl = pending.indexOf("\n")) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      const t = Date.parse(line.split(" ")[0] ?? "");
      if (!Number.isNaN(t)) out.push(now - t);
    }
  }
  await reader.cancel();
  return out;
}

/** Exec round trips: one byte to `cat` in the pod and back (`rounds` of them). */
async function execRoundTrips(rounds = ROUNDS): Promise<number[]> {
  const q = "command=cat&container=cat&stdin=true&stdout=true&stderr=false";
  const ws = await connectWebSocket({
    url: `${hub.url.replace(/^http/, "ws")}${podPath()}/exec?${q}`,
    protocols: ["v5.channel.k8s.io"],
    headers: { authorization: `Bearer ${hub.operatorToken}` },
    ca: hub.caPem,
  });
  // Bytes echoed so far; each round waits for one more.
  let echoed = 0;
  let back: (() => void) | undefined;
  ws.onMessage((d) => {
    if (d[0] !== 1) return;
    echoed += d.length - 1;
    back?.();
  });
  const samples: number[] = [];
  for (let i = 0; i < rounds + 5; i++) {
    const t0 = performance.now();
    await new Promise<void>((resolve) => {
      back = () => {
        if (echoed >= i + 1) resolve();
      };
      ws.send(Uint8Array.of(0, 0x61));
    });
    if (i >= 5) samples.push(performance.now() - t0);
  }
  ws.send(Uint8Array.of(255, 0));
  ws.close();
  return samples;
}

/** MB/s of downloading /big through a port-forward command (best of 3); with `alongside`, that
 * runs during the first download. */
async function throughput(
  cmd: string[],
  env: Record<string, string>,
  alongside?: () => Promise<void>,
): Promise<number> {
  const pf = new Background(cmd, env);
  try {
    const port = (await pf.waitFor(/Forwarding from 127\.0\.0\.1:(\d+) -> 8080/, "the forward"))[1];
    let best = 0;
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now();
      const download = fetch(`http://127.0.0.1:${port}/big`).then((r) => r.arrayBuffer());
      if (i === 0 && alongside !== undefined) await alongside();
      const bytes = (await download).byteLength;
      if (bytes !== MB * 1024 * 1024) throw new Error(`downloaded ${bytes} bytes, not ${MB} MiB`);
      best = Math.max(best, bytes / 1e6 / ((performance.now() - t0) / 1000));
    }
    return best;
  } finally {
    await pf.stop();
  }
}

/** The agent's CPU (% of one core) over the next `seconds`. */
async function agentCpu(seconds: number): Promise<number> {
  const ticks = async () => {
    const stat = await Bun.file(`/proc/${agent.proc?.pid}/stat`).text();
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return Number(f[11]) + Number(f[12]);
  };
  const a = await ticks();
  await Bun.sleep(seconds * 1000);
  return ((await ticks()) - a) / seconds;
}

/** The agent's CPU while `n` clients follow the ticker's log. */
async function followsCpu(n: number): Promise<{ cpu: number; lines: number }> {
  const aborts: AbortController[] = [];
  let lines = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      const abort = new AbortController();
      aborts.push(abort);
      const res = await hub.api(`${podPath()}/log?container=ticker&follow=true&tailLines=0`, {
        signal: abort.signal,
      });
      void (async () => {
        try {
          for await (const chunk of res.body as ReadableStream<Uint8Array>)
            for (const b of chunk) if (b === 10) lines++;
        } catch {
          // aborted at the end
        }
      })();
    }),
  );
  await Bun.sleep(1000);
  const before = lines;
  const cpu = await agentCpu(WINDOW);
  const got = lines - before;
  for (const a of aborts) a.abort();
  return { cpu, lines: got };
}

const fmt = (x: number) => x.toFixed(1);
try {
  await hub.start();
  args.push("--hub", hub.url, "--join-token", await hub.joinToken());
  await agent.start();
  agent.writeManifest("bench.yaml", manifest(agent.tb.busybox));
  await agent.waitPod(
    "bench",
    "ready",
    (p) => p.status?.containerStatuses?.every((c) => c.ready) === true,
    120_000,
  );
  await Bun.sleep(3000); // httpd starts after the file is written
  const lat = await logLatency();
  console.log(
    `logs -f line latency (${lat.length} lines): p50 ${fmt(pct(lat, 50))} ms, p90 ${fmt(pct(lat, 90))} ms; target p50 <= 50 ms: ${pct(lat, 50) <= 50 ? "yes" : "no"}`,
  );
  const rt = await execRoundTrips();
  console.log(
    `exec round trip, one byte (${rt.length} rounds): p50 ${fmt(pct(rt, 50))} ms, p90 ${fmt(pct(rt, 90))} ms; target p50 <= 20 ms: ${pct(rt, 50) <= 20 ? "yes" : "no"}`,
  );
  const env = {
    FLEETLET_HUB_TOKEN: hub.operatorToken,
    FLEETLET_HUB_CA: join(hub.dataDir, "tls", "ca.crt"),
  };
  let busyRt: number[] = [];
  const ours = await throughput(
    [fleetletBin, "port-forward", podName(), "0:8080", "--hub", hub.url],
    env,
    async () => {
      busyRt = await execRoundTrips(50);
    },
  );
  console.log(
    `port-forward throughput (fleetlet port-forward, ${MB} MiB, best of 3): ${fmt(ours)} MB/s; target >= 50 MB/s: ${ours >= 50 ? "yes" : "no"}`,
  );
  console.log(
    `exec round trip during a port-forward download (50 rounds): p50 ${fmt(pct(busyRt, 50))} ms, p90 ${fmt(pct(busyRt, 90))} ms`,
  );
  const kubectl = Bun.which("kubectl");
  if (kubectl !== null) {
    const kc = await Bun.spawn(
      [fleetletBin, "hub", "kubeconfig", "--hub", hub.url, "--data", hub.dataDir],
      { stdout: "pipe" },
    );
    const file = join(hub.dataDir, "kubeconfig");
    await Bun.write(file, await new Response(kc.stdout).text());
    const theirs = await throughput([kubectl, "port-forward", `pod/${podName()}`, ":8080"], {
      KUBECONFIG: file,
    });
    console.log(
      `port-forward throughput (kubectl port-forward, SPDY over WebSocket): ${fmt(theirs)} MB/s`,
    );
  } else
    console.log("port-forward throughput with kubectl: not measured (kubectl is not installed)");
  const idle = await agentCpu(WINDOW);
  const busy = await followsCpu(FOLLOWS);
  console.log(
    `agent CPU over ${WINDOW} s: ${fmt(idle)} % of a core with no follows; ${fmt(busy.cpu)} % with ${FOLLOWS} concurrent logs -f (${busy.lines} lines delivered); target <= 10 %: ${busy.cpu <= 10 ? "yes" : "no"}`,
  );
} finally {
  await agent.cleanup();
  await hub.cleanup();
}
process.exit(0);
