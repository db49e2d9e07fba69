// The agent's memory and idle CPU as a device owner sees them: RSS (VmRSS) with 0, 10 and 110
// pods, what it is made of (file-backed pages of the executable, anonymous memory, the JavaScript
// heap), its CPU while nothing changes, and the size of the executable.
//
//   node_modules/.bin/bun scripts/bench/agent-memory.ts [--settle 40] [--idle 30] [--bin PATH]
//       (needs root, the test bed and a built dist/fleetlet; --bin: another build to measure)
//
// The compiled agent at its default timings (relist 1 s, 60 s while the runtime's event stream
// flows; sync 60 s, file check 20 s, housekeeping 2 s), host-network busybox sleepers. Each RSS is
// read `--settle` seconds after the pods are Running (the agent runs a full garbage collection
// every 30 s), as the last of 5 readings a second apart, with the maximum of those. Idle CPU is
// utime+stime from /proc over `--idle` seconds, with 0 pods and with 110. Pods are removed at the
// end, also on error.
import { readFileSync, statSync } from "node:fs";
import { createCriClient } from "../../src/cri/index.ts";
import { TestAgent } from "../../test/lib/agent.ts";
import { fleetletBin } from "../../test/lib/testbed.ts";
import {
  benchOptions,
  cleanupAgentBench,
  cpuTicks,
  DEFAULT_TIMING_FLAGS,
  metricValue,
  rssMB,
  sleeperManifest,
} from "./agent-common.ts";

const opts = benchOptions("agent-memory", { settle: 40, idle: 30, bin: fleetletBin });
const agent = new TestAgent({
  bin: opts.bin,
  args: ["--max-pods", "110", "--pleg-relist-period", "1s", ...DEFAULT_TIMING_FLAGS],
});
const cri = createCriClient({ endpoint: agent.tb.endpoint });

/** File-backed and anonymous resident memory (MB) from /proc/<pid>/smaps_rollup. */
function split(pid: number): { file: number; anon: number } {
  const text = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, "m").exec(text)?.[1] ?? 0);
  return { file: (kb("Rss") - kb("Anonymous")) / 1024, anon: kb("Anonymous") / 1024 };
}

async function heapMB(): Promise<number> {
  const text = await (await agent.request("/metrics")).text();
  return (metricValue(text, "fleetlet_js_heap_bytes") ?? Number.NaN) / 2 ** 20;
}

async function reading(pid: number, label: string): Promise<number> {
  await Bun.sleep(opts.settle * 1000);
  const samples: number[] = [];
  for (let i = 0; i < 5; i++) {
    samples.push(rssMB(pid));
    await Bun.sleep(1000);
  }
  const last = samples[samples.length - 1] as number;
  const { file, anon } = split(pid);
  console.log(
    `  ${label.padEnd(9)} RSS ${last.toFixed(1)} MB (max ${Math.max(...samples).toFixed(1)}): executable's pages ${file.toFixed(1)} MB, anonymous ${anon.toFixed(1)} MB, JS heap ${(await heapMB()).toFixed(1)} MB`,
  );
  return last;
}

async function idleCpu(pid: number, label: string): Promise<number> {
  const t0 = cpuTicks(pid);
  await Bun.sleep(opts.idle * 1000);
  const pct = (cpuTicks(pid) - t0) / opts.idle;
  console.log(`  idle CPU ${label}: ${pct.toFixed(2)} % of one core over ${opts.idle} s`);
  return pct;
}

async function podsRunning(n: number): Promise<void> {
  for (let i = 0; i < 6000; i++) {
    const pods = await agent.pods();
    if (pods.filter((p) => p.status?.phase === "Running").length >= n) return;
    await Bun.sleep(200);
  }
  throw new Error(`${n} pods not Running after 20 min`);
}

async function main() {
  const size = statSync(opts.bin).size;
  console.log(
    `agent-memory: ${opts.bin} ${(size / 2 ** 20).toFixed(1)} MiB (${(size / 1e6).toFixed(1)} MB)`,
  );
  await cri.pullImage({ image: { image: agent.tb.busybox } });
  await agent.start();
  const pid = agent.proc?.pid as number;
  const r0 = await reading(pid, "0 pods");
  const c0 = await idleCpu(pid, "with 0 pods");
  for (let i = 0; i < 10; i++)
    agent.writeManifest(`p${i}.yaml`, sleeperManifest(`p${i}`, agent.tb.busybox));
  await podsRunning(10);
  const r10 = await reading(pid, "10 pods");
  for (let i = 10; i < 110; i++)
    agent.writeManifest(`p${i}.yaml`, sleeperManifest(`p${i}`, agent.tb.busybox));
  await podsRunning(110);
  const r110 = await reading(pid, "110 pods");
  const c110 = await idleCpu(pid, "with 110 pods");
  console.log(
    `targets: 10 pods <= 64 MB: ${r10 <= 64 ? "yes" : "no"}, 110 pods <= 100 MB: ${r110 <= 100 ? "yes" : "no"} (0 pods ${r0.toFixed(1)} MB; idle CPU ${c0.toFixed(2)} / ${c110.toFixed(2)} %)`,
  );
}

try {
  await main();
} finally {
  await cleanupAgentBench(agent, cri);
}
