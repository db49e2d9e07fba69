import { describe, expect, test } from "bun:test";
import { registerHealthMetrics } from "../../../src/agent/health/metrics.ts";
import { createMetricsRegistry } from "../../../src/agent/server/metrics.ts";
import { HealthHistory } from "../../../src/hub/health.ts";
import type { DeviceHealth } from "../../../src/protocol/health.ts";
import { decodeAgentMessage } from "../../../src/protocol/index.ts";

const HEALTH: DeviceHealth = {
  collectedAt: 1_700_000_000_000,
  bootTime: 1_699_999_000_000,
  uptimeSeconds: 1000,
  load: [0.5, 0.25, 0.125],
  temperatures: [{ zone: "thermal_zone0", type: "cpu-thermal", celsius: 48.5 }],
  throttled: { raw: 0x50000, flags: ["under-voltage-occurred", "throttled-occurred"] },
  filesystems: [
    {
      mountpoint: "/",
      device: "/dev/root",
      fsType: "ext4",
      totalBytes: 100,
      usedBytes: 60,
      availableBytes: 30,
    },
  ],
  storage: [{ device: "mmcblk0", lifeUsedPercent: 20, preEol: "normal" }],
  interfaces: [{ name: "eth0", state: "up", addresses: ["10.0.0.2/24"], rxBytes: 7, txBytes: 9 }],
};

describe("health metrics on the agent's /metrics", () => {
  test("show the latest reading as gauges", () => {
    const metrics = createMetricsRegistry();
    let latest: DeviceHealth | undefined;
    registerHealthMetrics(metrics, () => latest);
    expect(metrics.render()).not.toContain("fleetlet_node_temperature_celsius{");
    latest = HEALTH;
    const text = metrics.render();
    for (const line of [
      'fleetlet_node_temperature_celsius{zone="thermal_zone0",type="cpu-thermal"} 48.5',
      'fleetlet_node_throttled{flag="throttled-occurred"} 1',
      'fleetlet_node_load{period="5m"} 0.25',
      "fleetlet_node_boot_time_seconds 1699999000",
      'fleetlet_node_filesystem_used_bytes{mountpoint="/"} 60',
      'fleetlet_node_storage_life_used_percent{device="mmcblk0"} 20',
      'fleetlet_node_network_receive_bytes_total{interface="eth0"} 7',
      'fleetlet_node_network_transmit_bytes_total{interface="eth0"} 9',
    ])
      expect(text).toContain(line);
  });
});

describe("the hub's health history", () => {
  test("keeps the last N reports per node, oldest first, and forgets a node", () => {
    const h = new HealthHistory(3);
    for (let i = 1; i <= 5; i++) h.add("cam-1", { ...HEALTH, collectedAt: i });
    h.add("cam-2", HEALTH);
    expect(h.view("cam-1").history.map((r) => r.collectedAt)).toEqual([3, 4, 5]);
    expect(h.view("cam-1").latest?.collectedAt).toBe(5);
    h.forget("cam-1");
    expect(h.view("cam-1")).toEqual({
      apiVersion: "fleetlet.io/v1",
      kind: "NodeHealth",
      node: "cam-1",
      history: [],
    });
    expect(h.view("cam-2").latest).toEqual(HEALTH);
  });
});

describe("decoding a health message", () => {
  test("a good one decodes to the same facts", () => {
    const d = decodeAgentMessage(JSON.stringify({ type: "health", health: HEALTH }));
    expect(d).toEqual({ ok: true, message: { type: "health", health: HEALTH } });
  });

  test.each<[string, unknown, string]>([
    ["no health", {}, "bad health message: health: "],
    [
      "a temperature as text",
      { ...HEALTH, temperatures: [{ zone: "z", type: "t", celsius: "hot" }] },
      "bad health message: health.temperatures.0.celsius: ",
    ],
    [
      "a negative size",
      { ...HEALTH, filesystems: [{ ...HEALTH.filesystems[0], usedBytes: -1 }] },
      "bad health message: health.filesystems.0.usedBytes: ",
    ],
    ["two load averages", { ...HEALTH, load: [1, 2] }, "bad health message: health.load"],
    [
      "too many interfaces",
      { ...HEALTH, interfaces: Array(65).fill(HEALTH.interfaces[0]) },
      "bad health message: health.interfaces: ",
    ],
    [
      "an unknown pre-EOL state",
      { ...HEALTH, storage: [{ device: "mmcblk0", preEol: "dying" }] },
      "bad health message: health.storage.0.preEol: ",
    ],
  ])("%s is refused as malformed, naming the field", (_, health, reason) => {
    const body =
      health === undefined
        ? { type: "health" }
        : { type: "health", ...(Object.keys(health as object).length > 0 && { health }) };
    const d = decodeAgentMessage(JSON.stringify(body));
    expect(d.ok).toBe(false);
    if (d.ok) return;
    expect(d.code).toBe("malformed");
    expect(d.reason.startsWith(reason)).toBe(true);
  });
});
