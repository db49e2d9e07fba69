// The device manager's costs, in two parts.
//
// 1. Admission and allocation per pod, beyond the plugin's own answers: the device manager (with
//    its checkpoint in a temporary folder) and the test device plugin (test/lib/device-plugin.ts,
//    over gRPC on a unix socket) in this process. Each round takes one pod asking for 2 of 1,000
//    devices through admit(), prepare() (GetPreferredAllocation, Allocate, the checkpoint
//    written and synced) and containerOptions() (PreStartContainer), and makes the same three
//    calls to the plugin directly (the plugin's own answers); the two alternate which goes first,
//    and the difference is taken per round. Pods are freed again every 100 rounds.
// 2. The compiled agent's CPU while a plugin flips a device's health every second: the agent on
//    the test bed (needs root and `scripts/testbed start`) with the test plugin process
//    (test/lib/device-plugin-main.ts), its CPU time over a window without flips and one with.
//
//   node_modules/.bin/bun scripts/bench/devices.ts [--rounds N] [--window S] [--skip-agent]
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectDevicePlugin } from "../../src/agent/cm/devicemanager/endpoint.ts";
import { DeviceManagerCore } from "../../src/agent/cm/devicemanager/manager.ts";
import type { Pod } from "../../src/api/types.ts";
import { realClock } from "../../src/util/clock.ts";
import { nullLogger } from "../../src/util/log.ts";
import { TestAgent } from "../../test/lib/agent.ts";
import { makeContainer, makePod } from "../../test/lib/builders.ts";
import { TestDevicePlugin } from "../../test/lib/device-plugin.ts";
import type { DevicePluginProcessConfig } from "../../test/lib/device-plugin-main.ts";
import { eventually, repoRoot } from "../../test/lib/testbed.ts";
import { cpuTicks } from "./agent-common.ts";

function option(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? fallback : Number(process.argv[i + 1]);
}

const RESOURCE = "example.com/widget";
const DEVICES = 1000;

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

const ms = (n: number) => `${n.toFixed(3)} ms`;

async function allocationCost(rounds: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "fl-bd-"));
  const plugin = new TestDevicePlugin({
    dir,
    socketName: "widget.sock",
    resourceName: RESOURCE,
    devices: Array.from({ length: DEVICES }, (_, i) => ({ id: `w${i}`, healthy: true })),
    preStartRequired: true,
    preferredAvailable: true,
    envsFor: (ids) => ({ WIDGETS: ids.join(",") }),
  });
  await plugin.start();
  const registration = {
    version: "v1beta1",
    endpoint: "widget.sock",
    resourceName: RESOURCE,
    options: { preStartRequired: true, getPreferredAllocationAvailable: true },
  };
  const endpoint = await connectDevicePlugin(registration, {
    dir,
    logger: nullLogger,
    callTimeoutMs: 30_000,
  });
  const direct = await connectDevicePlugin(registration, {
    dir,
    logger: nullLogger,
    callTimeoutMs: 30_000,
  });
  let active: Pod[] = [];
  const manager = DeviceManagerCore.open({
    clock: realClock,
    logger: nullLogger,
    checkpointDir: dir,
    event: () => {},
    activePods: () => active,
    sourcesReady: () => true,
  });
  manager.addEndpoint(endpoint);
  await eventually("the plugin's devices", async () => manager.allocatable()[RESOURCE] === DEVICES);
  const ours: number[] = [];
  const raw: number[] = [];
  const diff: number[] = [];
  const available = Array.from({ length: DEVICES }, (_, i) => `w${i}`);
  for (let round = -5; round < rounds; round++) {
    if (active.length >= 100) {
      active = [];
      manager.removeStale(new Set());
    }
    const pod = makePod({
      name: `p${round + 5}`,
      containers: [makeContainer({ name: "c", resources: { limits: { [RESOURCE]: "2" } } })],
    });
    const viaManager = async () => {
      const t0 = performance.now();
      if (manager.admit(pod, active) !== undefined) throw new Error("admission refused a pod");
      const prepared = await manager.prepare(pod);
      if (prepared.state !== "ready") throw new Error(`prepare: ${JSON.stringify(prepared)}`);
      await manager.containerOptions(pod, pod.spec.containers[0] as never);
      return performance.now() - t0;
    };
    const viaPlugin = async () => {
      const t0 = performance.now();
      const ids = await direct.preferredAllocation(available, [], 2);
      await direct.allocate(ids);
      await direct.preStartContainer(ids);
      return performance.now() - t0;
    };
    const first = round % 2 === 0;
    const a = first ? await viaManager() : await viaPlugin();
    const b = first ? await viaPlugin() : await viaManager();
    active.push(pod);
    const [m, p] = first ? [a, b] : [b, a];
    if (round < 0) continue; // warm-up
    ours.push(m);
    raw.push(p);
    diff.push(m - p);
  }
  for (const list of [ours, raw, diff]) list.sort((x, y) => x - y);
  const mean = diff.reduce((s, d) => s + d, 0) / diff.length;
  console.log(
    `admission and allocation of one pod asking for 2 of ${DEVICES} devices, ${rounds} rounds`,
  );
  console.log(
    `  through the device manager   p50 ${ms(quantile(ours, 0.5))}  p90 ${ms(quantile(ours, 0.9))}`,
  );
  console.log(
    `  the plugin's calls alone     p50 ${ms(quantile(raw, 0.5))}  p90 ${ms(quantile(raw, 0.9))}`,
  );
  console.log(
    `  difference per round         p50 ${ms(quantile(diff, 0.5))}  p90 ${ms(quantile(diff, 0.9))}  mean ${ms(mean)}`,
  );
  console.log(`  beyond the plugin p50 <= 5 ms: ${quantile(diff, 0.5) <= 5 ? "yes" : "no"}`);
  endpoint.close();
  direct.close();
  plugin.stop();
  rmSync(dir, { recursive: true, force: true });
}

async function healthFlipCpu(windowS: number): Promise<void> {
  const dir = mkdtempSync("/tmp/fl-bf-");
  const plugins = join(dir, "plugins");
  const agentConfig = join(dir, "agent.yaml");
  writeFileSync(agentConfig, `devicePluginPath: ${plugins}\n`);
  const agent = new TestAgent({ args: ["--config", agentConfig] });
  const config: DevicePluginProcessConfig = {
    dir: plugins,
    socketName: "widget.sock",
    resourceName: RESOURCE,
    devices: Array.from({ length: 8 }, (_, i) => ({ id: `w${i}`, healthy: true })),
  };
  const configPath = join(dir, "plugin.json");
  writeFileSync(configPath, JSON.stringify(config));
  let plugin: ReturnType<typeof Bun.spawn> | undefined;
  try {
    await agent.start();
    plugin = Bun.spawn(
      [process.execPath, join(repoRoot, "test/lib/device-plugin-main.ts"), configPath],
      { stdout: "ignore", stderr: "ignore" },
    );
    const node = async () =>
      (await (await agent.request(`/api/v1/nodes/${agent.nodeName}`)).json()) as {
        status: { allocatable?: Record<string, string> };
      };
    await eventually(
      "the plugin's devices",
      async () => (await node()).status.allocatable?.[RESOURCE] === "8",
    );
    const pid = agent.proc?.pid as number;
    const cpu = async (flip: boolean) => {
      const t0 = cpuTicks(pid);
      const start = performance.now();
      for (let s = 0; s < windowS; s++) {
        if (flip) {
          config.devices = config.devices.map((d, i) =>
            i === 0 ? { ...d, healthy: !d.healthy } : d,
          );
          writeFileSync(configPath, JSON.stringify(config));
          plugin?.kill("SIGHUP");
        }
        await Bun.sleep(1000);
      }
      const seconds = (performance.now() - start) / 1000;
      return (cpuTicks(pid) - t0) / seconds; // ticks are 1/100 s: % of a core
    };
    const quiet = await cpu(false);
    const flipping = await cpu(true);
    console.log(`the agent's CPU over ${windowS} s windows (8 devices, one pod-less node)`);
    console.log(`  no health changes                ${quiet.toFixed(2)} % of a core`);
    console.log(`  one device flipping every second ${flipping.toFixed(2)} % of a core`);
    console.log(`  flipping <= 1 % of a core: ${flipping <= 1 ? "yes" : "no"}`);
  } finally {
    plugin?.kill("SIGTERM");
    await agent.cleanup();
    rmSync(dir, { recursive: true, force: true });
  }
}

await allocationCost(option("rounds", 300));
if (!process.argv.includes("--skip-agent")) await healthFlipCpu(option("window", 60));
process.exit(0);
