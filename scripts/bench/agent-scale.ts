// The agent at its pod limit: 110 manifests (maxPods) written at once, the time until all are
// Running, then a steady state with nothing changing: the agent's CPU (% of one core, from
// /proc/<pid>/stat), the duration of one PLEG relist (fleetlet_pleg_relist_duration_seconds and
// the mean from the _total counters on /metrics) and its RSS (VmRSS), with its JavaScript heap
// (fleetlet_js_heap_bytes) at the end.
//
//   node_modules/.bin/bun scripts/bench/agent-scale.ts [--pods 110] [--steady 60]
//       [--relist-period 1s]        (needs root and the test bed)
//
// The steady state is measured with the agent's default timings (relist 1s, sync 60s, file
// check 20s, housekeeping 2s) unless --relist-period is given. The local API is not polled
// during the steady window. Everything it creates is removed at the end, also on error.
import { createCriClient } from "../../src/cri/index.ts";
import { TestAgent } from "../../test/lib/agent.ts";
import {
  benchOptions,
  cleanupAgentBench,
  cpuTicks,
  DEFAULT_TIMING_FLAGS,
  metricValue,
  rssMB,
  sleeperManifest,
} from "./agent-common.ts";

const USER_HZ = 100;

const opts = benchOptions("agent-scale", { pods: 110, steady: 60, "relist-period": "1s" });
const agent = new TestAgent({
  args: [
    "--max-pods",
    String(opts.pods),
    "--pleg-relist-period",
    opts["relist-period"],
    ...DEFAULT_TIMING_FLAGS,
  ],
});
const cri = createCriClient({ endpoint: agent.tb.endpoint });

async function metrics(): Promise<string> {
  return (await agent.request("/metrics")).text();
}

async function allRunning(n: number): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    agent.writeManifest(`p${i}.yaml`, sleeperManifest(`p${i}`, agent.tb.busybox));
  }
  for (;;) {
    const pods = await agent.pods();
    const running = pods.filter((p) => p.status?.phase === "Running").length;
    if (running === n) return performance.now() - t0;
    if (performance.now() - t0 > 600_000)
      throw new Error(`only ${running}/${n} Running after 600 s`);
    await Bun.sleep(250);
  }
}

async function steady(pid: number, seconds: number) {
  const before = await metrics();
  const ticks0 = cpuTicks(pid);
  const t0 = performance.now();
  const rss: number[] = [];
  while (performance.now() - t0 < seconds * 1000) {
    await Bun.sleep(1000);
    rss.push(rssMB(pid));
  }
  const cpu = ((cpuTicks(pid) - ticks0) / USER_HZ / ((performance.now() - t0) / 1000)) * 100;
  const after = await metrics();
  const count =
    (metricValue(after, "fleetlet_pleg_relists_total") ?? 0) -
    (metricValue(before, "fleetlet_pleg_relists_total") ?? 0);
  const sum =
    (metricValue(after, "fleetlet_pleg_relist_seconds_total") ?? 0) -
    (metricValue(before, "fleetlet_pleg_relist_seconds_total") ?? 0);
  return {
    cpu,
    relistMean: (sum / Math.max(1, count)) * 1000,
    relistLast: (metricValue(after, "fleetlet_pleg_relist_duration_seconds") ?? Number.NaN) * 1000,
    relists: count,
    rssMax: Math.max(...rss),
    rssLast: rss[rss.length - 1] ?? Number.NaN,
    heap: (metricValue(after, "fleetlet_js_heap_bytes") ?? Number.NaN) / 2 ** 20,
  };
}

async function main() {
  await cri.pullImage({ image: { image: agent.tb.busybox } });
  await agent.start();
  const pid = agent.proc?.pid;
  if (pid === undefined) throw new Error("the agent did not start");
  console.log(
    `agent-scale: ${opts.pods} pods, relist period ${opts["relist-period"]}, steady ${opts.steady} s`,
  );
  const took = await allRunning(opts.pods);
  console.log(`  all ${opts.pods} Running after: ${(took / 1000).toFixed(1)} s (target <= 60 s)`);
  await Bun.sleep(5000); // let the last syncs and events settle
  const s = await steady(pid, opts.steady);
  console.log(`  steady state over ${opts.steady} s:`);
  console.log(`    agent CPU: ${s.cpu.toFixed(2)} % of one core (target <= 3 %)`);
  console.log(
    `    PLEG relist: mean ${s.relistMean.toFixed(1)} ms over ${s.relists} relists, last ${s.relistLast.toFixed(1)} ms (target <= 20 ms)`,
  );
  console.log(
    `    agent RSS: ${s.rssLast.toFixed(1)} MB (max ${s.rssMax.toFixed(1)} MB; target <= 120 MB); JS heap ${s.heap.toFixed(1)} MB`,
  );
}

try {
  await main();
} finally {
  const t0 = performance.now();
  await cleanupAgentBench(agent, cri);
  console.log(`  (cleanup took ${((performance.now() - t0) / 1000).toFixed(1)} s)`);
}
