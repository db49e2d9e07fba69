// gRPC probes against hostile servers, one attack at a time (test/lib/h2-attacks.ts): the
// compiled agent runs a well-behaved gRPC-probed pod throughout; for each attack it gets one more
// host-network pod whose readiness probe (every second, timeout 3 s) dials a server answering
// with that attack. For each it prints the agent's RSS before (baseline: the most over 3 s), its
// peak while the attack runs (VmHWM, reset before), how many times the probe dialled, and the
// agent's CPU in that window.
//
//   node_modules/.bin/bun scripts/bench/hostile-probes.ts [--window S] [--bin PATH]   (needs root,
//   the test bed and a built dist/fleetlet; --bin: another build, e.g. an older one, to compare)

import { readFileSync, writeFileSync } from "node:fs";
import { TestAgent } from "../../test/lib/agent.ts";
import { ATTACKS } from "../../test/lib/h2-attacks.ts";
import { rawServer } from "../../test/lib/h2-peer.ts";
import { probedPodManifest } from "../../test/lib/manifests.ts";
import { startGRPCHealthServer } from "../../test/lib/probe-servers.ts";
import { eventually } from "../../test/lib/testbed.ts";
import { cpuTicks, rssMB } from "./agent-common.ts";

function option(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? undefined : process.argv[i + 1];
}

const pod = (image: string, name: string, port: number) =>
  probedPodManifest(name, image, `grpc: { port: ${port} }`);

function peakMB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN) / 1024;
}

async function main() {
  const windowS = Number(option("window") ?? 15);
  const bin = option("bin");
  const agent = new TestAgent(bin === undefined ? {} : { bin });
  const health = await startGRPCHealthServer();
  try {
    await agent.start();
    const pid = agent.proc?.pid as number;
    agent.writeManifest("benign.yaml", pod(agent.tb.busybox, "benign", health.port));
    await agent.waitPod(
      "benign",
      "Ready",
      (p) => p.status?.containerStatuses?.[0]?.ready === true,
      60_000,
    );
    console.log(`attack                 dials  baseline MB  peak MB  rise MB  agent CPU`);
    for (const attack of ATTACKS) {
      const server = rawServer({ hostname: "127.0.0.1" }, (c) => attack.serve(c));
      let baseline = 0;
      for (let i = 0; i < 15; i++) {
        baseline = Math.max(baseline, rssMB(pid));
        await Bun.sleep(200);
      }
      writeFileSync(`/proc/${pid}/clear_refs`, "5");
      const t0 = cpuTicks(pid);
      const file = `hostile-${attack.name}.yaml`;
      agent.writeManifest(file, pod(agent.tb.busybox, `hostile-${attack.name}`, server.port));
      await Bun.sleep(windowS * 1000);
      const cpu = (cpuTicks(pid) - t0) / windowS; // ticks are 1/100 s: this is % of a core
      const peak = peakMB(pid);
      console.log(
        `${attack.name.padEnd(22)} ${String(server.connections.length).padStart(5)}  ${baseline.toFixed(1).padStart(11)}  ${peak.toFixed(1).padStart(7)}  ${(peak - baseline).toFixed(1).padStart(7)}  ${cpu.toFixed(1).padStart(8)} %`,
      );
      agent.removeManifest(file);
      await eventually(
        `hostile-${attack.name} gone`,
        async () => (await agent.pod(`hostile-${attack.name}`)) === undefined,
        60_000,
      );
      server.stop();
    }
  } finally {
    await agent.cleanup();
    await health.stop();
  }
}

await main();
