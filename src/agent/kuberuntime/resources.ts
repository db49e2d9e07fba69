// Container resources mapped to cgroup settings, with kubelet's formulas: cpu shares from the cpu
// request (the limit when there is no request; minimum 2, maximum 262144), a CFS quota over a
// 100 ms period from the cpu limit (minimum 1 ms), the memory limit, and oom_score_adj by QoS
// class (Guaranteed and node-critical pods -997, BestEffort 1000, Burstable
// 1000 - 1000 × memoryRequest / nodeMemory, kept within 3..999).

import { cpuToMilli, getPodQOS, memoryToBytes } from "../../api/index.ts";
import type { Container, Pod } from "../../api/types.ts";
import type { LinuxContainerResources } from "../../cri/index.ts";

export const MIN_SHARES = 2;
export const MAX_SHARES = 262_144;
export const QUOTA_PERIOD_US = 100_000;
export const MIN_QUOTA_US = 1_000;
const GUARANTEED_OOM_SCORE_ADJ = -997;
const BEST_EFFORT_OOM_SCORE_ADJ = 1000;
/** Priority of system-node-critical; pods at or above it are treated as Guaranteed. */
const NODE_CRITICAL_PRIORITY = 2_000_001_000;

export function milliCPUToShares(milliCPU: number): number {
  if (milliCPU <= 0) return MIN_SHARES;
  const shares = Math.trunc((milliCPU * 1024) / 1000);
  return Math.min(MAX_SHARES, Math.max(MIN_SHARES, shares));
}

/** 0 when there is no limit. */
export function milliCPUToQuota(milliCPU: number, periodUs = QUOTA_PERIOD_US): number {
  if (milliCPU <= 0) return 0;
  return Math.max(MIN_QUOTA_US, Math.trunc((milliCPU * periodUs) / 1000));
}

function quantity(text: string | undefined, convert: (q: string) => number): number {
  if (text === undefined) return 0;
  try {
    return convert(text);
  } catch {
    return 0;
  }
}

export function oomScoreAdj(pod: Pod, c: Container, nodeMemoryBytes: number): number {
  if ((pod.spec.priority ?? 0) >= NODE_CRITICAL_PRIORITY) return GUARANTEED_OOM_SCORE_ADJ;
  const qos = getPodQOS(pod);
  if (qos === "Guaranteed") return GUARANTEED_OOM_SCORE_ADJ;
  if (qos === "BestEffort") return BEST_EFFORT_OOM_SCORE_ADJ;
  const request = quantity(c.resources?.requests?.memory, memoryToBytes);
  if (nodeMemoryBytes <= 0) return BEST_EFFORT_OOM_SCORE_ADJ - 1;
  const adj = 1000 - Math.trunc((1000 * request) / nodeMemoryBytes);
  if (adj < 1000 + GUARANTEED_OOM_SCORE_ADJ) return 1000 + GUARANTEED_OOM_SCORE_ADJ;
  if (adj >= BEST_EFFORT_OOM_SCORE_ADJ) return BEST_EFFORT_OOM_SCORE_ADJ - 1;
  return adj;
}

export function containerResources(
  pod: Pod,
  c: Container,
  nodeMemoryBytes: number,
): LinuxContainerResources {
  const cpuRequest = quantity(c.resources?.requests?.cpu, cpuToMilli);
  const cpuLimit = quantity(c.resources?.limits?.cpu, cpuToMilli);
  const memoryLimit = quantity(c.resources?.limits?.memory, memoryToBytes);
  const out: LinuxContainerResources = {
    cpuShares: milliCPUToShares(cpuRequest === 0 && cpuLimit > 0 ? cpuLimit : cpuRequest),
    oomScoreAdj: oomScoreAdj(pod, c, nodeMemoryBytes),
  };
  if (memoryLimit > 0) out.memoryLimitInBytes = memoryLimit;
  if (cpuLimit > 0) {
    out.cpuPeriod = QUOTA_PERIOD_US;
    out.cpuQuota = milliCPUToQuota(cpuLimit);
  }
  return out;
}
