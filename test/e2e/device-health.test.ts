// Device health end to end: a real agent reads its device's /proc and /sys, reports to a real
// hub, and the hub serves it to the dashboard's API and `fleetlet describe node`; the agent's own
// /metrics shows the same facts. The runtime is a containerd of its own whose image filesystem
// is a tmpfs, a kind reported only because the runtime names it. Needs root and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import type { DeviceHealth } from "../../src/protocol/health.ts";
import { TestAgent } from "../lib/agent.ts";
import { TestHub } from "../lib/hub.ts";
import { SmallContainerd } from "../lib/small-containerd.ts";
import { eventually, fleetletBin } from "../lib/testbed.ts";

const hub = new TestHub(["--heartbeat-interval", "1s"]);
const args = ["--device-health-period", "1s", "--device-health-counters-period", "2s"];
const runtime = new SmallContainerd(64, { tmpfs: true });
const agent = new TestAgent({ args, endpoint: runtime.endpoint });

interface HealthView {
  latest?: DeviceHealth;
  history: DeviceHealth[];
}

async function hubHealth(): Promise<HealthView | undefined> {
  const res = await hub.api(`/api/v1/nodes/${agent.nodeName}/health`);
  return res.status === 200 ? ((await res.json()) as HealthView) : undefined;
}

beforeAll(async () => {
  await hub.start();
  await runtime.start();
  args.push("--hub", hub.url, "--join-token", await hub.joinToken());
  await agent.start();
}, 60_000);
afterAll(async () => {
  await agent.cleanup();
  await runtime.stop();
  await hub.cleanup();
}, 60_000);

describe("device health from agent to hub (needs root and the test bed)", () => {
  test("the hub serves the device's health read from its /proc and /sys", async () => {
    const view = await eventually(
      "health in the hub",
      async () => (await hubHealth())?.latest,
      20_000,
    );
    const btime = Number(/^btime (\d+)$/m.exec(readFileSync("/proc/stat", "utf8"))?.[1]);
    expect(view.bootTime).toBe(btime * 1000);
    expect(view.load?.length).toBe(3);
    expect(view.uptimeSeconds).toBeGreaterThan(0);
    expect(view.filesystems.length).toBeGreaterThan(0);
    const root = view.filesystems.find((f) => agent.rootDir.startsWith(f.mountpoint));
    expect(root?.totalBytes).toBeGreaterThan(0);
    expect(view.interfaces.some((i) => i.addresses.length > 0)).toBe(true);
    expect(view.interfaces.some((i) => i.name === "lo")).toBe(false);
  });

  test("the runtime's image filesystem, as its ImageFsInfo names it, is reported too", async () => {
    const images = await eventually(
      "the image filesystem in the hub's health",
      async () =>
        (await hubHealth())?.latest?.filesystems.find((f) => f.mountpoint === runtime.root),
      20_000,
    );
    expect(images.totalBytes).toBe(64 * 1024 * 1024);
  }, 30_000);

  test("counters alone make a report at the counters period, so the history grows", async () => {
    await eventually(
      "a second report",
      async () => ((await hubHealth())?.history.length ?? 0) >= 2 || undefined,
      20_000,
    );
  });

  test("fleetlet describe node shows the Health section", () => {
    const p = Bun.spawnSync([fleetletBin, "describe", "node", agent.nodeName, "--hub", hub.url], {
      env: { ...process.env, FLEETLET_HUB_TOKEN: hub.operatorToken },
    });
    const out = p.stdout.toString();
    expect(p.exitCode).toBe(0);
    expect(out).toContain(agent.nodeName);
    for (const part of [
      "Health:",
      "Boot time:",
      "Load:",
      "Filesystems:",
      "MOUNTPOINT",
      "Interfaces:",
    ])
      expect(out).toContain(part);
  });

  test("the agent's /metrics shows the health gauges", async () => {
    const text = await (await agent.request("/metrics")).text();
    expect(text).toMatch(/^fleetlet_node_boot_time_seconds \d+/m);
    expect(text).toMatch(/^fleetlet_node_filesystem_used_bytes\{mountpoint="[^"]+"\} \d+/m);
    expect(text).toMatch(/^fleetlet_node_load\{period="1m"\} [\d.]+/m);
    expect(text).toMatch(/^fleetlet_node_network_receive_bytes_total\{interface="[^"]+"\} \d+/m);
  });
});
