import { describe, expect, test } from "bun:test";
import { HealthReporter, significant } from "../../../src/agent/health/reporter.ts";
import type { DeviceHealth } from "../../../src/protocol/health.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";

function health(over: Partial<DeviceHealth> = {}): DeviceHealth {
  return {
    collectedAt: 1,
    uptimeSeconds: 10,
    load: [0.5, 0.4, 0.3],
    temperatures: [{ zone: "thermal_zone0", type: "cpu", celsius: 50.2 }],
    filesystems: [
      {
        mountpoint: "/",
        device: "d",
        fsType: "ext4",
        totalBytes: 1000,
        usedBytes: 500,
        availableBytes: 500,
      },
    ],
    interfaces: [{ name: "eth0", state: "up", addresses: ["10.0.0.2/24"], rxBytes: 1, txBytes: 1 }],
    ...over,
  };
}

describe("significant changes", () => {
  test.each<[string, Partial<DeviceHealth>]>([
    [
      "temperature under 0.5 °C",
      { temperatures: [{ zone: "thermal_zone0", type: "cpu", celsius: 50.4 }] },
    ],
    ["load under 0.05", { load: [0.52, 0.4, 0.3] }],
    [
      "use under 0.5 %",
      {
        filesystems: [
          {
            mountpoint: "/",
            device: "d",
            fsType: "ext4",
            totalBytes: 1000,
            usedBytes: 504,
            availableBytes: 496,
          },
        ],
      },
    ],
    [
      "counters and uptime",
      {
        uptimeSeconds: 99,
        collectedAt: 9,
        interfaces: [
          { name: "eth0", state: "up", addresses: ["10.0.0.2/24"], rxBytes: 9e9, txBytes: 7 },
        ],
      },
    ],
  ])("%s is not one", (_, over) => {
    expect(significant(health(over))).toBe(significant(health()));
  });

  test.each<[string, Partial<DeviceHealth>]>([
    [
      "temperature by 1 °C",
      { temperatures: [{ zone: "thermal_zone0", type: "cpu", celsius: 51.2 }] },
    ],
    ["load by 0.1", { load: [0.6, 0.4, 0.3] }],
    [
      "use by 1 %",
      {
        filesystems: [
          {
            mountpoint: "/",
            device: "d",
            fsType: "ext4",
            totalBytes: 1000,
            usedBytes: 510,
            availableBytes: 490,
          },
        ],
      },
    ],
    ["throttling", { throttled: { raw: 4, flags: ["throttled"] } }],
    ["an address", { interfaces: [{ name: "eth0", state: "up", addresses: ["10.0.0.3/24"] }] }],
    ["boot time", { bootTime: 5 }],
  ])("%s is one", (_, over) => {
    expect(significant(health(over))).not.toBe(significant(health()));
  });
});

function setup(readings: DeviceHealth[]) {
  const clock = new FakeClock();
  const sent: DeviceHealth[] = [];
  let connected = true;
  let i = 0;
  const reporter = new HealthReporter({
    clock,
    logger: nullLogger,
    collect: () => readings[Math.min(i++, readings.length - 1)] ?? health(),
    periodMs: 60_000,
    countersPeriodMs: 600_000,
  });
  reporter.bind((h) => connected && sent.push(h) > 0);
  return { clock, sent, reporter, disconnect: (v: boolean) => (connected = !v) };
}

describe("the health reporter", () => {
  test("sends the first reading, then only significant changes", () => {
    const a = health();
    const b = health({ uptimeSeconds: 70 });
    const c = health({ load: [1.5, 0.4, 0.3] });
    const { sent, reporter, clock } = setup([a, b, c]);
    reporter.tick();
    clock.step(60_000);
    reporter.tick();
    clock.step(60_000);
    reporter.tick();
    expect(sent).toEqual([a, c]);
  });

  test("a change only in counters is sent once countersPeriodMs has passed", () => {
    const { sent, reporter, clock } = setup([health()]);
    reporter.tick();
    clock.step(599_999);
    reporter.tick();
    expect(sent.length).toBe(1);
    clock.step(1);
    reporter.tick();
    expect(sent.length).toBe(2);
  });

  test("a reading made while disconnected is sent when the next connection is welcomed", () => {
    const { sent, reporter, disconnect } = setup([health(), health({ bootTime: 9 })]);
    disconnect(true);
    reporter.tick();
    expect(sent).toEqual([]);
    disconnect(false);
    reporter.reconnected();
    expect(sent).toEqual([health()]);
  });

  test("a collector that throws is logged and the loop goes on", () => {
    const clock = new FakeClock();
    const reporter = new HealthReporter({
      clock,
      logger: nullLogger,
      collect: () => {
        throw new Error("boom");
      },
      periodMs: 1,
      countersPeriodMs: 1,
    });
    expect(() => reporter.tick()).not.toThrow();
    expect(reporter.latest).toBeUndefined();
  });
});
