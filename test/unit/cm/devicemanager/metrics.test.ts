import { describe, expect, test } from "bun:test";
import type { DeviceStats } from "../../../../src/agent/cm/devicemanager/index.ts";
import { registerDeviceMetrics } from "../../../../src/agent/cm/devicemanager/metrics.ts";
import { createMetricsRegistry } from "../../../../src/agent/server/index.ts";

describe("device metrics", () => {
  test("plugins registered, devices by state, and Allocate calls by result; a dropped resource leaves", () => {
    const metrics = createMetricsRegistry();
    let stats: DeviceStats = {
      resources: [
        {
          resourceName: "fleetlet.io/serial",
          registered: true,
          devices: 3,
          healthy: 2,
          allocated: 1,
        },
        {
          resourceName: "vendor.example/gpu",
          registered: false,
          devices: 1,
          healthy: 0,
          allocated: 0,
        },
      ],
      allocations: 4,
      allocationFailures: 1,
    };
    registerDeviceMetrics(metrics, () => stats);
    let text = metrics.render();
    expect(text).toContain(
      'fleetlet_device_plugin_registered{resource_name="fleetlet.io/serial"} 1',
    );
    expect(text).toContain(
      'fleetlet_device_plugin_registered{resource_name="vendor.example/gpu"} 0',
    );
    expect(text).toContain('fleetlet_devices{resource_name="fleetlet.io/serial",state="all"} 3');
    expect(text).toContain(
      'fleetlet_devices{resource_name="fleetlet.io/serial",state="healthy"} 2',
    );
    expect(text).toContain(
      'fleetlet_devices{resource_name="fleetlet.io/serial",state="allocated"} 1',
    );
    expect(text).toContain('fleetlet_device_allocations_total{result="succeeded"} 3');
    expect(text).toContain('fleetlet_device_allocations_total{result="failed"} 1');
    stats = {
      resources: [stats.resources[0] as DeviceStats["resources"][number]],
      allocations: 6,
      allocationFailures: 1,
    };
    text = metrics.render();
    expect(text).not.toContain("vendor.example/gpu");
    expect(text).toContain('fleetlet_device_allocations_total{result="succeeded"} 5');
  });
});
