import { describe, expect, test } from "bun:test";
import { describeHealth } from "../../../src/cli/describe-node.ts";
import type { DeviceHealth } from "../../../src/protocol/health.ts";

const H: DeviceHealth = {
  collectedAt: Date.parse("2026-12-05T10:00:00Z"),
  bootTime: Date.parse("2026-12-05T08:00:00Z"),
  uptimeSeconds: 7260,
  load: [0.5, 0.25, 0.1],
  temperatures: [{ zone: "thermal_zone0", type: "cpu-thermal", celsius: 61.25 }],
  throttled: { raw: 0x50005, flags: ["under-voltage", "throttled"] },
  filesystems: [
    {
      mountpoint: "/",
      device: "/dev/mmcblk0p2",
      fsType: "ext4",
      totalBytes: 4 * 2 ** 30,
      usedBytes: 3 * 2 ** 30,
      availableBytes: 2 ** 30,
    },
  ],
  interfaces: [
    { name: "wlan0", state: "up", addresses: ["192.168.1.7/24"], rxBytes: 2048, txBytes: 10 },
  ],
};

describe("describe node's Health section", () => {
  test("shows the latest report's facts, filesystems and interfaces", () => {
    const text = describeHealth({
      apiVersion: "fleetlet.io/v1",
      kind: "NodeHealth",
      node: "cam-1",
      latest: H,
      history: [H, H],
    });
    for (const part of [
      "Boot time:",
      "2026-12-05T08:00:00.000Z",
      "Uptime:",
      "2h1m",
      "Load:",
      "0.50 0.25 0.10",
      "cpu-thermal 61.3°C",
      "0x50005 (under-voltage, throttled)",
      "/dev/mmcblk0p2",
      "4.0GiB",
      "75%",
      "wlan0",
      "192.168.1.7/24",
      "2.0KiB",
      "2 reports since 2026-12-05T10:00:00.000Z",
    ])
      expect(text).toContain(part);
  });

  test("says when the device reported nothing", () => {
    expect(
      describeHealth({ apiVersion: "fleetlet.io/v1", kind: "NodeHealth", node: "x", history: [] }),
    ).toBe("Health:\t<none reported>\n");
  });
});
