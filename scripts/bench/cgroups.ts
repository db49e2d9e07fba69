// Benchmark: the cost of pod cgroup setup per pod and of QoS cgroup updates with 110 pods, on
// this host's real cgroup hierarchies (v1 here; v2 where the host is unified), through the same
// container manager the agent uses. Needs root. Everything is made under
// /fleetlet-bench-<id> and removed at the end, on error and on Ctrl-C.
//
//   node_modules/.bin/bun scripts/bench/cgroups.ts [--pods 110] [--rounds 5]
import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import {
  createContainerManager,
  createCpuManager,
  detectCgroups,
} from "../../src/agent/cm/index.ts";
import type { Pod, ResourceRequirements } from "../../src/api/types.ts";
import { nullLogger } from "../../src/util/log.ts";
import { makeContainer, makePod } from "../../test/lib/builders.ts";
import { removeCgroupRoot } from "../../test/lib/cgroups.ts";

const { values } = parseArgs({
  options: { pods: { type: "string", default: "110" }, rounds: { type: "string", default: "5" } },
});
const podCount = Number(values.pods);
const rounds = Number(values.rounds);
if (!Number.isInteger(podCount) || podCount < 1 || !Number.isInteger(rounds) || rounds < 1) {
  console.error("usage: cgroups.ts [--pods N>=1] [--rounds N>=1]");
  process.exit(2);
}

const root = `/fleetlet-bench-${Date.now().toString(36)}`;
process.on("SIGINT", () => {
  void removeCgroupRoot(root).finally(() => process.exit(130));
});

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0;
};
const fmt = (xs: number[]) =>
  `p50 ${pct(xs, 50).toFixed(2)} ms  p90 ${pct(xs, 90).toFixed(2)} ms  max ${Math.max(...xs).toFixed(2)} ms`;

/** A mix like a device's: a third each of Guaranteed, Burstable and BestEffort pods. */
function podsOf(n: number, round: number): Pod[] {
  return Array.from({ length: n }, (_, i) => {
    const resources: ResourceRequirements =
      i % 3 === 0
        ? { limits: { cpu: "10m", memory: "16Mi" } }
        : i % 3 === 1
          ? { requests: { cpu: "10m", memory: "8Mi" }, limits: { memory: "32Mi" } }
          : {};
    return makePod({
      name: `bench-${round}-${i}`,
      containers: [makeContainer({ name: "main", resources })],
    });
  });
}

async function main(): Promise<void> {
  const cgroups = await detectCgroups(() => readFile("/proc/self/mountinfo", "utf8"));
  const cpu = createCpuManager({
    policy: "none",
    topology: { cpus: [{ id: 0, core: 0, socket: 0 }] },
    reserved: [],
    stateFile: `/tmp${root}-cpu_manager_state`,
    logger: nullLogger,
  });
  const cm = createContainerManager(
    {
      podsRoot: `${root}/kubepods`,
      podPidsLimit: 1024,
      allocatable: {
        capacity: { cpu: 64_000, memory: 1024 ** 4, ephemeralStorage: 0, pods: podCount },
        systemReserved: { cpu: 0, memory: 0, ephemeralStorage: 0 },
        kubeReserved: { cpu: 0, memory: 0, ephemeralStorage: 0 },
        evictionHard: {},
      },
    },
    { cgroups, cpu, logger: nullLogger },
  );
  await cm.start();
  const setup: number[] = [];
  const qos: number[] = [];
  const housekeeping: number[] = [];
  const teardown: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const pods = podsOf(podCount, r);
    for (const pod of pods) {
      cm.admit(pod, []);
      const t = performance.now();
      await cm.ensurePodCgroup(pod);
      setup.push(performance.now() - t);
    }
    // A QoS update with every pod admitted: what each new pod and each housekeeping pays.
    for (let i = 0; i < 20; i++) {
      const t = performance.now();
      await cm.housekeeping(pods, () => true);
      housekeeping.push(performance.now() - t);
    }
    for (let i = 0; i < 20; i++) {
      const t = performance.now();
      await cgroups.update(`${root}/kubepods/burstable`, { cpuShares: 2 + i });
      await cgroups.update(`${root}/kubepods/besteffort`, { cpuShares: 2 });
      qos.push(performance.now() - t);
    }
    for (const pod of pods) {
      const t = performance.now();
      await cm.removePodCgroup(pod.metadata.uid ?? "");
      teardown.push(performance.now() - t);
    }
  }
  console.log(`cgroup v${cgroups.version}, ${podCount} pods, ${rounds} rounds, root ${root}`);
  console.log(`pod cgroup setup per pod (QoS update + create):  ${fmt(setup)}`);
  console.log(`QoS cgroup update (2 cgroups written):           ${fmt(qos)}`);
  console.log(`housekeeping with ${podCount} pods (list + QoS):  ${fmt(housekeeping)}`);
  console.log(`pod cgroup removal per pod (list + kill + rmdir): ${fmt(teardown)}`);
}

try {
  await main();
} finally {
  await removeCgroupRoot(root);
  await Bun.file(`/tmp${root}-cpu_manager_state`)
    .delete()
    .catch(() => {});
}
