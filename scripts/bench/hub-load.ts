// Load on `fleetlet hub`: N simulated agents over real WebSockets on loopback (protocol level, no
// containers), the hub in its own process (dist/fleetlet). Measures the hub's RSS and the p99
// ingest latency (a pod status delta sent → its ack, which the hub sends once the delta is
// stored and visible in its API and watch streams) while every agent sends a delta and a
// heartbeat every 10 s; then restarts the hub and measures the time until every agent is back
// (exponential backoff with full jitter) and the hub has acknowledged what each resent.
//
//   node_modules/.bin/bun scripts/bench/hub-load.ts [--agents 10000] [--workers 4]
//     [--steady 30s] [--delta 10s] [--ramp 20s]
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseDuration } from "../../src/api/duration.ts";

const repo = resolve(import.meta.dir, "../..");
const bin = join(repo, "dist/fleetlet");
const bun = process.execPath;
const args = new Map<string, string>();
for (let i = 2; i < process.argv.length; i += 2)
  args.set(process.argv[i]?.replace(/^--/, "") ?? "", process.argv[i + 1] ?? "");
const N = Number(args.get("agents") ?? 10_000);
const W = Number(args.get("workers") ?? 4);
const steadyMs = parseDuration(args.get("steady") ?? "30s");
const deltaMs = parseDuration(args.get("delta") ?? "10s");
const rampMs = parseDuration(args.get("ramp") ?? "20s");
const dir = mkdtempSync(join(tmpdir(), "fleetlet-hub-load-"));
const ulimit = "ulimit -n 200000 2>/dev/null || ulimit -n $(ulimit -Hn)";

interface WorkerStats {
  open: number;
  caughtUp: number;
  reconnectedCaughtUp: number;
  errors: number;
}
const stats: WorkerStats[] = [];
let latencies: number[] = [];
const procs: ReturnType<typeof Bun.spawn>[] = [];
let hub: ReturnType<typeof Bun.spawn> | undefined;
let hubOut = "";
let started = false;

async function pump(s: ReadableStream<Uint8Array>, onLine: (line: string) => void): Promise<void> {
  let buf = "";
  for await (const chunk of s) {
    buf += new TextDecoder().decode(chunk);
    let i = buf.indexOf("\n");
    while (i >= 0) {
      onLine(buf.slice(0, i));
      buf = buf.slice(i + 1);
      i = buf.indexOf("\n");
    }
  }
}

async function until<T>(
  what: string,
  fn: () => T | undefined | false,
  timeoutMs: number,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await Bun.sleep(100);
  }
}

async function startHub(port: number): Promise<string> {
  hubOut = "";
  hub = Bun.spawn(
    [
      "sh",
      "-c",
      `${ulimit}; exec "$0" hub --data "$1" --listen "127.0.0.1:$2" --log-level warn`,
      bin,
      join(dir, "hub"),
      String(port),
    ],
    {
      stdout: "pipe",
      stderr: "pipe",
    },
  );
  void pump(hub.stdout as ReadableStream<Uint8Array>, (l) => {
    hubOut += `${l}\n`;
  });
  void pump(hub.stderr as ReadableStream<Uint8Array>, (l) => {
    hubOut += `${l}\n`;
  });
  if (!started) await until("the hub's operator token", () => /flo_\S+/.test(hubOut), 10_000);
  started = true;
  return hubOut;
}

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m?.[1] ?? 0) / 1024;
}

function pct(xs: number[], p: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
}

const sum = (k: keyof WorkerStats) => stats.reduce((a, s) => a + (s?.[k] ?? 0), 0);

async function joinAll(url: string, token: string): Promise<[string, string][]> {
  const res = await fetch(`${url}/api/v1/join-tokens`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}` },
    body: "{}",
  });
  const joinToken = ((await res.json()) as { token: string }).token;
  const out: [string, string][] = [];
  let next = 0;
  const one = async () => {
    while (next < N) {
      const name = `bench-${next++}`;
      const r = await fetch(`${url}/api/v1/join`, {
        method: "POST",
        body: JSON.stringify({ joinToken, nodeName: name }),
      });
      out.push([name, ((await r.json()) as { credential: string }).credential]);
    }
  };
  await Promise.all(Array.from({ length: 32 }, one));
  return out;
}

async function main(): Promise<void> {
  const free = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = free.port;
  free.stop(true);
  const out = await startHub(port);
  const token = /flo_\S+/.exec(out)?.[0] ?? "";
  const url = `http://127.0.0.1:${port}`;
  let t = Date.now();
  const creds = await joinAll(url, token);
  console.log(
    `joined ${N} nodes in ${((Date.now() - t) / 1000).toFixed(1)} s; hub RSS ${rssMiB(hub?.pid ?? 0).toFixed(0)} MiB`,
  );
  for (let w = 0; w < W; w++) {
    const file = join(dir, `agents-${w}.json`);
    writeFileSync(file, JSON.stringify(creds.filter((_, i) => i % W === w)));
    const p = Bun.spawn(
      [
        "sh",
        "-c",
        `${ulimit}; exec "$0" "$@"`,
        bun,
        join(import.meta.dir, "hub-load-agents.ts"),
        url,
        file,
        String(deltaMs),
        String(rampMs),
      ],
      { stdout: "pipe", stderr: "inherit" },
    );
    procs.push(p);
    void pump(p.stdout as ReadableStream<Uint8Array>, (l) => {
      const s = JSON.parse(l) as WorkerStats & { latencies: number[] };
      stats[w] = s;
      latencies.push(...s.latencies);
    });
  }
  t = Date.now();
  await until(
    `${N} agents connected and acknowledged`,
    () => sum("caughtUp") >= N && sum("open") >= N,
    rampMs + 120_000,
  );
  console.log(
    `all ${N} agents connected and acknowledged after ${((Date.now() - t) / 1000).toFixed(1)} s (ramp ${rampMs / 1000} s)`,
  );
  latencies = [];
  let maxRss = 0;
  const steadyEnd = Date.now() + steadyMs;
  while (Date.now() < steadyEnd) {
    maxRss = Math.max(maxRss, rssMiB(hub?.pid ?? 0));
    await Bun.sleep(1000);
  }
  const lat = latencies;
  console.log(
    `steady ${steadyMs / 1000} s: ${lat.length} deltas acked, ingest latency p50 ${pct(lat, 50).toFixed(1)} ms, p99 ${pct(lat, 99).toFixed(1)} ms, max ${pct(lat, 100).toFixed(1)} ms`,
  );
  console.log(
    `hub RSS max ${maxRss.toFixed(0)} MiB with ${sum("open")} agents (target <= 300 MB: ${maxRss * 1.048576 <= 300 ? "yes" : "no"})`,
  );
  console.log(`p99 <= 100 ms: ${pct(lat, 99) <= 100 ? "yes" : "no"}`);
  t = Date.now();
  hub?.kill("SIGTERM");
  await hub?.exited;
  await startHub(port);
  const back = await until(
    `${N} agents reconnected and converged`,
    () => sum("reconnectedCaughtUp") >= N && Date.now(),
    180_000,
  );
  const s = (back - t) / 1000;
  console.log(
    `hub restarted: all ${N} agents reconnected and converged in ${s.toFixed(1)} s (target <= 60 s: ${s <= 60 ? "yes" : "no"}); hub RSS ${rssMiB(hub?.pid ?? 0).toFixed(0)} MiB; error messages received ${sum("errors")} (one "shutting-down" per agent is expected)`,
  );
}

function cleanup(): void {
  for (const p of procs) p.kill("SIGKILL");
  hub?.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
}

process.on("SIGINT", () => {
  cleanup();
  process.exit(130);
});
try {
  await main();
} catch (err) {
  console.error(`hub-load failed: ${(err as Error).message}`);
  process.exitCode = 1;
} finally {
  cleanup();
}
