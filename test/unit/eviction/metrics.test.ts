import { describe, expect, test } from "bun:test";
import { registerEvictionMetrics } from "../../../src/agent/eviction/metrics.ts";
import { createMetricsRegistry } from "../../../src/agent/server/index.ts";

describe("eviction metrics", () => {
  test("evictions by signal, pressure conditions and the node's PSI as ratios", () => {
    const metrics = createMetricsRegistry();
    const evictions = new Map([["memory.available", 2]]);
    registerEvictionMetrics(
      metrics,
      { evictions: () => evictions, conditions: () => ["MemoryPressure"] },
      () => ({
        memory: {
          some: { avg10: 12.5, avg60: 2, avg300: 0 },
          full: { avg10: 1, avg60: 0, avg300: 0 },
        },
      }),
    );
    let text = metrics.render();
    expect(text).toContain('fleetlet_evictions_total{eviction_signal="memory.available"} 2');
    expect(text).toContain('fleetlet_node_pressure_condition{condition="MemoryPressure"} 1');
    expect(text).toContain('fleetlet_node_pressure_condition{condition="DiskPressure"} 0');
    expect(text).toContain(
      'fleetlet_node_pressure_stall_ratio{resource="memory",kind="some",window="10s"} 0.125',
    );
    expect(text).toContain(
      'fleetlet_node_pressure_stall_ratio{resource="memory",kind="full",window="10s"} 0.01',
    );
    evictions.set("memory.available", 3);
    evictions.set("emptydirfs.limit", 1);
    text = metrics.render();
    expect(text).toContain('fleetlet_evictions_total{eviction_signal="memory.available"} 3');
    expect(text).toContain('fleetlet_evictions_total{eviction_signal="emptydirfs.limit"} 1');
  });
});
