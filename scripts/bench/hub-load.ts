// Load on `fleetlet hub`: N simulated agents over real WebSockets on loopback (protocol level, no
// containers), the hub in its own process (dist/fleetlet). Measures the hub's RSS and the p99
// ingest latency (a pod status delta sent → its ack, which the hub sends once the delta is
// stored and visible in its API and watch streams) while every agent sends a delta and a
// heartbeat every 10 s; then restarts the hub and measures the time until every agent is back
// (exponential backoff with full jitter) and the hub has acknowledged what each resent.
//
//   node_modules/.bin/bun scripts/bench/hub-load.ts [--agents 10000] [--workers 4]
//     [--steady 30s] [--delta 10s] [--ramp 20s]
// With --replicas N --store postgres --bus nats: N replicas on PostgreSQL and NATS
// (hub-load-replicas.ts).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseDuration } from "../../src/api/duration.ts";
import {
  benchArgs,
  freePort,
  HubProcess,
  joinAll,
  pct,
  runBench,
  spawnWorkers,
  until,
} from "./hub-common.ts";
import { replicasMain } from "./hub-load-replicas.ts";

const _bun = process.execPath;
const args = benchArgs();
const cluster = args.has("replicas");
const N = Number(args.get("agents") ?? 10_000);
const W = Number(args.get("workers") ?? 4);
const steadyMs = parseDuration(args.get("steady") ?? "30s");
const deltaMs = parseDuration(args.get("delta") ?? "10s");
const rampMs = parseDuration(args.get("ramp") ?? "20s");
const dir = cluster ? "" : mkdtempSync(join(tmpdir(), "fleetlet-hub-load-"));

interface WorkerStats {
  open: number;
  caughtUp: number;
  reconnectedCaughtUp: number;
  errors: number;
}
const stats: WorkerStats[] = [];
let latencies: number[] = [];
const procs: ReturnType<typeof Bun.spawn>[] = [];
let hub: HubProcess | undefined;

const sum = (k: keyof WorkerStats) => stats.reduce((a, s) => a + (s?.[k] ?? 0), 0);

async function main(): Promise<void> {
  hub = new HubProcess(join(dir, "hub"), freePort());
  await hub.start();
  const url = hub.url;
  let t = Date.now();
  const creds = await joinAll(url, hub.token, N);
  console.log(
    `joined ${N} nodes in ${((Date.now() - t) / 1000).toFixed(1)} s; hub RSS ${hub.rss().toFixed(0)} MiB`,
  );
  procs.push(
    ...spawnWorkers({
      dir,
      creds,
      workers: W,
      script: "hub-load-agents.ts",
      url,
      args: [String(deltaMs), String(rampMs)],
      onLine: (w, l) => {
        const s = JSON.parse(l) as WorkerStats & { latencies: number[] };
        stats[w] = s;
        latencies.push(...s.latencies);
      },
    }),
  );
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
    maxRss = Math.max(maxRss, hub.rss());
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
  await hub.stop();
  await hub.start();
  const back = await until(
    `${N} agents reconnected and converged`,
    () => sum("reconnectedCaughtUp") >= N && Date.now(),
    180_000,
  );
  const s = (back - t) / 1000;
  console.log(
    `hub restarted: all ${N} agents reconnected and converged in ${s.toFixed(1)} s (target <= 60 s: ${s <= 60 ? "yes" : "no"}); hub RSS ${hub.rss().toFixed(0)} MiB; error messages received ${sum("errors")} (one "shutting-down" per agent is expected)`,
  );
}

function cleanup(): void {
  for (const p of procs) p.kill("SIGKILL");
  hub?.proc?.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
}

if (cluster) await replicasMain(args);
else await runBench("hub-load", main, cleanup);
