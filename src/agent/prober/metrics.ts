// The prober's metrics: probe runs by kind and result, and the delay of scheduled probes.

import type { MetricsRegistry } from "../server/index.ts";
import type { ProbeStats } from "./stats.ts";

export function registerProbeMetrics(metrics: MetricsRegistry, stats: () => ProbeStats): void {
  const runs = metrics.counter("fleetlet_prober_probes_total", "Probe runs, by kind and result.", [
    "probe_type",
    "result",
  ]);
  const delay = metrics.gauge(
    "fleetlet_prober_probe_delay_seconds",
    "Delay from a probe's scheduled time to its run, over the last 4096 runs.",
    ["quantile"],
  );
  const samples = metrics.gauge(
    "fleetlet_prober_probe_delay_samples",
    "Scheduled probe runs the delay quantiles are computed over.",
  );
  metrics.onCollect(() => {
    const s = stats();
    for (const [key, n] of Object.entries(s.runs)) {
      const [probe_type = "", result = ""] = key.split("/");
      const labels = { probe_type, result };
      runs.inc(labels, Math.max(0, n - runs.get(labels)));
    }
    delay.set({ quantile: "0.5" }, s.delay.p50 / 1000);
    delay.set({ quantile: "0.99" }, s.delay.p99 / 1000);
    delay.set({ quantile: "1" }, s.delay.max / 1000);
    samples.set({}, s.delay.samples);
  });
}
