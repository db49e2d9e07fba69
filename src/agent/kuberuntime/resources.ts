// Container resources mapped to cgroup settings, with kubelet's formulas: cpu shares from the cpu
// request (the limit when there is no request; minimum 2, maximum 262144), a CFS quota over a
// 100 ms period from the cpu limit (minimum 1 ms), the memory limit, and oom_score_adj by QoS
// class (Guaranteed and node-critical pods -997, BestEffort 1000, Burstable
// 1000 - 1000 × memoryRequest / nodeMemory, kept within 3..999), and the CPU manager's cpuset.

import { cpuToMilli, getPodQOS, memoryToBytes } from "../../api/index.ts";
import type { Container, Pod } from "../../api/types.ts";
import type { LinuxContainerResources } from "../../cri/index.ts";
import { milliCPUToQuota, milliCPUToShares, QUOTA_PERIOD_US } from "../cm/convert.ts";

export { milliCPUToQuota, milliCPUToShares } from "../cm/convert.ts";

const GUARANTEED_OOM_SCORE_ADJ = -997;
const BEST_EFFORT_OOM_SCORE_ADJ = 1000;
/** Priority of system-node-critical. */
const NODE_CRITICAL_PRIORITY = 2_000_001_000;

/** Static pods are critical; node-critical ones have the system-node-critical class. */
function isNodeCritical(pod: Pod): boolean {
  return (
    pod.spec.priorityClassName === "system-node-critical" ||
    (pod.spec.priority ?? 0) >= NODE_CRITICAL_PRIORITY
  );
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
  if (isNodeCritical(pod)) return GUARANTEED_OOM_SCORE_ADJ;
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
  cpusetCpus = "",
): LinuxContainerResources {
  const cpuRequest = quantity(c.resources?.requests?.cpu, cpuToMilli);
  const cpuLimit = quantity(c.resources?.limits?.cpu, cpuToMilli);
  const memoryLimit = quantity(c.resources?.limits?.memory, memoryToBytes);
  const out: LinuxContainerResources = {
    cpuShares: milliCPUToShares(cpuRequest === 0 && cpuLimit > 0 ? cpuLimit : cpuRequest),
    oomScoreAdj: oomScoreAdj(pod, c, nodeMemoryBytes),
  };
  if (memoryLimit > 0) out.memoryLimitInBytes = memoryLimit;
  if (cpusetCpus !== "") out.cpusetCpus = cpusetCpus;
  if (cpuLimit > 0) {
    out.cpuPeriod = QUOTA_PERIOD_US;
    out.cpuQuota = milliCPUToQuota(cpuLimit);
  }
  return out;
}
