// The eviction manager's metrics: evictions by signal (the kubelet's evictions metric), the
// pressure conditions, and the node's pressure stall information.

import type { PressureCondition } from "../evictionapi/signals.ts";
import type { MetricsRegistry } from "../server/index.ts";
import { type NodePsi, PSI_RESOURCES } from "./psi.ts";

export interface EvictionMetricsSource {
  evictions(): ReadonlyMap<string, number>;
  conditions(): readonly PressureCondition[];
}

const CONDITIONS: PressureCondition[] = ["MemoryPressure", "DiskPressure", "PIDPressure"];

export function registerEvictionMetrics(
  metrics: MetricsRegistry,
  eviction: EvictionMetricsSource,
  psi: () => NodePsi,
): void {
  const evicted = metrics.counter(
    "fleetlet_evictions_total",
    "Pods evicted, by eviction signal or local storage limit.",
    ["eviction_signal"],
  );
  const pressure = metrics.gauge(
    "fleetlet_node_pressure_condition",
    "1 while the node pressure condition is True.",
    ["condition"],
  );
  const stall = metrics.gauge(
    "fleetlet_node_pressure_stall_ratio",
    "The node's pressure stall information: the share of time some (or all) tasks waited on the resource, averaged over the window.",
    ["resource", "kind", "window"],
  );
  metrics.onCollect(() => {
    for (const [signal, n] of eviction.evictions()) {
      const labels = { eviction_signal: signal };
      evicted.inc(labels, Math.max(0, n - evicted.get(labels)));
    }
    const now = eviction.conditions();
    for (const c of CONDITIONS) pressure.set({ condition: c }, now.includes(c) ? 1 : 0);
    stall.reset();
    const read = psi();
    for (const resource of PSI_RESOURCES) {
      const line = read[resource];
      if (line === undefined) continue;
      for (const [kind, avg] of [
        ["some", line.some],
        ["full", line.full],
      ] as const) {
        if (avg === undefined) continue;
        stall.set({ resource, kind, window: "10s" }, avg.avg10 / 100);
        stall.set({ resource, kind, window: "60s" }, avg.avg60 / 100);
        stall.set({ resource, kind, window: "300s" }, avg.avg300 / 100);
      }
    }
  });
}
