// Counters of probe runs and the delay from a probe's scheduled time to its run, kept over the
// last `window` runs for quantiles (exposed as metrics for the benchmark and operators).

import type { ProbeKind, ProbeResult } from "./types.ts";

export interface ProbeStats {
  /** Probe runs by "<kind>/<result>". */
  runs: Record<string, number>;
  /** Delays (ms) over the window: how many, p50, p99, max. */
  delay: { samples: number; p50: number; p99: number; max: number };
}

export interface DelayStats {
  add(ms: number): void;
  count(kind: ProbeKind, result: ProbeResult): void;
  snapshot(): ProbeStats;
}

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0;
  const i = Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1);
  return sorted[Math.max(0, i)] ?? 0;
}

export function createDelayStats(window = 4096): DelayStats {
  const ring: number[] = [];
  let next = 0;
  const runs: Record<string, number> = {};
  return {
    add(ms) {
      if (ring.length < window) ring.push(ms);
      else ring[next] = ms;
      next = (next + 1) % window;
    },
    count(kind, result) {
      const key = `${kind}/${result}`;
      runs[key] = (runs[key] ?? 0) + 1;
    },
    snapshot() {
      const sorted = [...ring].sort((a, b) => a - b);
      return {
        runs: { ...runs },
        delay: {
          samples: sorted.length,
          p50: quantile(sorted, 0.5),
          p99: quantile(sorted, 0.99),
          max: sorted[sorted.length - 1] ?? 0,
        },
      };
    },
  };
}
