// The eviction manager at the agent's pod limit. A compiled agent runs N host-network pods
// (default 110) on a root dir of its own (a 512 MiB tmpfs: the node filesystem), R of them
// "victims" holding a few MiB in an emptyDir. Then:
//
// 1. CPU of one eviction cycle: this process builds an eviction manager the way the agent does
//    (createAgentEviction: the same readers of /proc, cgroupfs, statfs and CRI) over the agent's
//    pods, and times process CPU around synchronize(): a quiet cycle (no threshold met), a
//    memory cycle that ranks every pod and evicts one (cgroups and the runtime's container
//    stats read for all N), and a nodefs cycle (every pod's logs and volumes walked as well).
//    Evictions here are only recorded, never carried out.
// 2. Idle CPU of the agent with its eviction manager running at its default period, over a
//    steady window with nothing changing (as agent-scale).
// 3. From a threshold crossed to the victim's container stopped: the bench fills the node
//    filesystem past nodefs.available<256Mi with fallocate (time T0), and reads the victim's
//    container's finishedAt from the runtime; the target is the monitoring period (10 s) plus
//    the victim's grace period (1 s, a hard eviction).
//
//   node_modules/.bin/bun scripts/bench/eviction.ts [--pods 110] [--victims 5] [--cycles 50]
//       [--steady 60]                               (needs root and the test bed)
import { rmSync } from "node:fs";
import { join } from "node:path";
import { podCgroupName, podsRootName } from "../../src/agent/cm/index.ts";
import { AGENT_CONFIG_DEFAULTS } from "../../src/agent/config/index.ts";
import { createAgentEviction } from "../../src/agent/eviction/index.ts";
import type { Pod } from "../../src/api/types.ts";
import { createCriClient } from "../../src/cri/index.ts";
import { realClock } from "../../src/util/clock.ts";
import { deepFreeze } from "../../src/util/freeze.ts";
import { nullLogger } from "../../src/util/log.ts";
import { TestAgent } from "../../test/lib/agent.ts";
import { podManifest } from "../../test/lib/eviction.ts";
import {
  benchOptions,
  cleanupAgentBench,
  cpuTicks,
  DEFAULT_TIMING_FLAGS,
  quantile,
  rssMB,
  sleeperManifest,
} from "./agent-common.ts";

const opts = benchOptions("eviction", { pods: 110, victims: 5, cycles: 50, steady: 60 }, [
  "victims",
  "steady",
]);
const EVICTION_HARD = "memory.available<100Mi,nodefs.available<256Mi,nodefs.inodesFree<5%";
const agent = new TestAgent({
  rootDirMount: ["-t", "tmpfs", "-o", "size=512m", "tmpfs"],
  args: [
    "--max-pods",
    String(opts.pods),
    ...DEFAULT_TIMING_FLAGS,
    "--eviction-hard",
    EVICTION_HARD,
    "--eviction-pressure-transition-period",
    "1s",
  ],
});
const cri = createCriClient({ endpoint: agent.tb.endpoint });

async function startPods(): Promise<Pod[]> {
  for (let i = 0; i < opts.victims; i++) {
    const script = `dd if=/dev/zero of=/data/f bs=1M count=${opts.victims - i} && exec sleep 3600`;
    agent.writeManifest(`v${i}.yaml`, podManifest(agent, `v${i}`, { emptyDir: "", script }));
  }
  for (let i = opts.victims; i < opts.pods; i++)
    agent.writeManifest(`p${i}.yaml`, sleeperManifest(`p${i}`, agent.tb.busybox));
  const t0 = performance.now();
  for (;;) {
    const pods = await agent.pods();
    // Frozen, as the agent's own pod objects are (the pod config freezes them).
    if (pods.filter((p) => p.status?.phase === "Running").length === opts.pods)
      return pods.map((p) => deepFreeze(p));
    if (performance.now() - t0 > 600_000) throw new Error("not all pods Running after 600 s");
    await Bun.sleep(500);
  }
}

/** CPU ms of `cycles` synchronize() calls of a manager with the given hard thresholds, and
 * how many of those cycles evicted a pod. */
async function cycleCpu(
  pods: Pod[],
  evictionHard: Record<string, string>,
): Promise<{ samples: number[]; evicted: number }> {
  let evicted = 0;
  const manager = createAgentEviction({
    config: {
      ...AGENT_CONFIG_DEFAULTS,
      nodeName: agent.nodeName,
      rootDir: agent.rootDir,
      podLogsDir: agent.logsDir,
      cgroupRoot: agent.cgroupRoot,
      evictionHard,
    },
    cri,
    clock: realClock,
    logger: nullLogger,
    podCgroupName: (pod) => podCgroupName(podsRootName(agent.cgroupRoot), pod),
    activePods: () => pods,
    evictPod: () => {
      evicted++;
    },
    podCleanedUp: () => true,
    nodeEvent: () => {},
  });
  const samples: number[] = [];
  for (let i = 0; i < opts.cycles + 3; i++) {
    const before = process.cpuUsage();
    await manager.synchronize();
    const used = process.cpuUsage(before);
    if (i >= 3) samples.push((used.user + used.system) / 1000);
  }
  return { samples, evicted };
}

function report(what: string, r: { samples: number[]; evicted: number }): void {
  const f = (q: number) => quantile(r.samples, q).toFixed(2);
  console.log(
    `    ${what}: p50 ${f(0.5)} ms, p90 ${f(0.9)} ms, max ${f(1)} ms of CPU (${r.evicted} of ${opts.cycles + 3} cycles evicted)`,
  );
}

async function idleCpu(pid: number): Promise<{ cpu: number; rss: number }> {
  const ticks0 = cpuTicks(pid);
  const t0 = performance.now();
  await Bun.sleep(opts.steady * 1000);
  const seconds = (performance.now() - t0) / 1000;
  return { cpu: ((cpuTicks(pid) - ticks0) / 100 / seconds) * 100, rss: rssMB(pid) };
}

/** One round: fill the node filesystem, time the victim's container to its stop. */
async function stopLatency(victim: string): Promise<number> {
  const pod = (await agent.pod(victim)) as Pod;
  const id = (pod.status?.containerStatuses?.[0]?.containerID ?? "").replace("containerd://", "");
  const fill = join(agent.rootDir, "bench-fill");
  const p = Bun.spawnSync(["fallocate", "-l", "300M", fill], { stderr: "pipe" });
  const t0 = Date.now();
  if (p.exitCode !== 0) throw new Error(`fallocate: ${p.stderr.toString()}`);
  try {
    for (;;) {
      const { status } = await cri.containerStatus({ containerId: id });
      if (status?.state === "CONTAINER_EXITED") return status.finishedAt / 1e6 - t0;
      if (Date.now() - t0 > 60_000) throw new Error(`${victim} still running after 60 s`);
      await Bun.sleep(20);
    }
  } finally {
    rmSync(fill, { force: true });
    agent.removeManifest(`${victim}.yaml`);
  }
}

async function main() {
  await cri.pullImage({ image: { image: agent.tb.busybox } });
  await agent.start();
  const pid = agent.proc?.pid;
  if (pid === undefined) throw new Error("the agent did not start");
  console.log(`eviction: ${opts.pods} pods (${opts.victims} victims), ${opts.cycles} cycles`);
  const pods = await startPods();
  await Bun.sleep(12_000); // the runtime's stats of the new containers settle
  console.log(
    "  1. one eviction cycle over all pods (this process, the agent's code and readers):",
  );
  report("quiet (no threshold met)", await cycleCpu(pods, { "memory.available": "100Mi" }));
  report("memory: rank all and evict one", await cycleCpu(pods, { "memory.available": "4Ti" }));
  report("nodefs: rank all and evict one", await cycleCpu(pods, { "nodefs.available": "99%" }));
  console.log("     (target: <= 5 ms)");
  if (opts.steady === 0) return;
  const idle = await idleCpu(pid);
  console.log(
    `  2. agent idle CPU over ${opts.steady} s with ${opts.pods} pods, manager every 10 s: ${idle.cpu.toFixed(2)} % of one core (target <= 3 %); RSS ${idle.rss.toFixed(1)} MB`,
  );
  if (opts.victims === 0) return;
  const latencies: number[] = [];
  for (let i = 0; i < opts.victims; i++) {
    latencies.push(await stopLatency(`v${i}`));
    await Bun.sleep(3000 + Math.random() * 4000); // the next fill lands at another phase
  }
  console.log(
    `  3. threshold crossed -> victim's container stopped, ${opts.victims} rounds: ${latencies.map((l) => (l / 1000).toFixed(2)).join(", ")} s; max ${(Math.max(...latencies) / 1000).toFixed(2)} s (target <= 10 s period + 1 s grace)`,
  );
}

try {
  await main();
} finally {
  await cleanupAgentBench(agent, cri);
}
