// What a pod asks for, and the cgroup settings kubelet derives from it.
//
// A pod's request (and limit) of a resource is the larger of the sum over its app containers
// and the largest single init container (init containers run one at a time, before the apps).
// Quantities that do not parse count as 0 (validation refuses them before a pod gets here).
import { cpuToMilli, getPodQOS, memoryToBytes } from "../../api/index.ts";
import type { Container, Pod, PodQOSClass, ResourceList } from "../../api/types.ts";
import type { ResourceConfig } from "./cgroup.ts";
import { MIN_SHARES, milliCPUToQuota, milliCPUToShares, QUOTA_PERIOD_US } from "./convert.ts";

/** Amounts in kubelet's admission units: cpu in millicores, memory and storage in bytes. */
export interface Amounts {
  cpu: number;
  memory: number;
  ephemeralStorage: number;
}

export const ZERO: Readonly<Amounts> = Object.freeze({ cpu: 0, memory: 0, ephemeralStorage: 0 });

function amount(text: string | undefined, convert: (q: string) => number): number {
  if (text === undefined) return 0;
  try {
    return Math.max(0, convert(String(text)));
  } catch {
    return 0;
  }
}

function amountsOf(list: ResourceList | undefined): Amounts {
  return {
    cpu: amount(list?.cpu, cpuToMilli),
    memory: amount(list?.memory, memoryToBytes),
    ephemeralStorage: amount(list?.["ephemeral-storage"], memoryToBytes),
  };
}

export function addAmounts(a: Amounts, b: Amounts): Amounts {
  return {
    cpu: a.cpu + b.cpu,
    memory: a.memory + b.memory,
    ephemeralStorage: a.ephemeralStorage + b.ephemeralStorage,
  };
}

function maxAmounts(a: Amounts, b: Amounts): Amounts {
  return {
    cpu: Math.max(a.cpu, b.cpu),
    memory: Math.max(a.memory, b.memory),
    ephemeralStorage: Math.max(a.ephemeralStorage, b.ephemeralStorage),
  };
}

/** Limits default to... nothing; requests default to limits (as API defaulting does). */
function containerRequests(c: Container): ResourceList | undefined {
  const r = c.resources;
  if (r?.limits === undefined) return r?.requests;
  return { ...r.limits, ...r.requests };
}

function podTotal(pod: Pod, pick: (c: Container) => ResourceList | undefined): Amounts {
  let apps: Amounts = ZERO;
  for (const c of pod.spec.containers) apps = addAmounts(apps, amountsOf(pick(c)));
  let init: Amounts = ZERO;
  for (const c of pod.spec.initContainers ?? []) init = maxAmounts(init, amountsOf(pick(c)));
  return maxAmounts(apps, init);
}

export function podRequests(pod: Pod): Amounts {
  return podTotal(pod, containerRequests);
}

function podLimits(pod: Pod): Amounts {
  return podTotal(pod, (c) => c.resources?.limits);
}

export interface PodCgroupOptions {
  /** Pids limit of every pod cgroup; ≤ 0 for none (kubelet's podPidsLimit, default -1). */
  podPidsLimit: number;
  cpuPeriodUs?: number;
}

/**
 * kubelet's ResourceConfigForPod: Guaranteed pods get shares, quota and memory limit;
 * Burstable pods shares, and quota (memory limit) only when every container sets a cpu
 * (memory) limit; BestEffort pods the minimum shares. Pod-level pids limit on all.
 */
export function podResourceConfig(pod: Pod, opts: PodCgroupOptions): ResourceConfig {
  const period = opts.cpuPeriodUs ?? QUOTA_PERIOD_US;
  const requests = podRequests(pod);
  const limits = podLimits(pod);
  const declared = (key: "cpu" | "memory") =>
    pod.spec.containers.every((c) => amountsOf(c.resources?.limits)[key] > 0);
  const qos = getPodQOS(pod);
  const out: ResourceConfig = {};
  if (qos === "BestEffort") out.cpuShares = MIN_SHARES;
  else out.cpuShares = milliCPUToShares(requests.cpu);
  if (qos === "Guaranteed" || (qos === "Burstable" && declared("cpu"))) {
    out.cpuQuota = milliCPUToQuota(limits.cpu, period);
    out.cpuPeriod = period;
  }
  if (qos === "Guaranteed" || (qos === "Burstable" && declared("memory")))
    out.memory = limits.memory;
  if (opts.podPidsLimit > 0) out.pidsLimit = opts.podPidsLimit;
  return out;
}

/** The cgroup names of the hierarchy under `root` (e.g. "/kubepods"). */
export function qosCgroupName(root: string, qos: PodQOSClass): string {
  if (qos === "Guaranteed") return root;
  return `${root}/${qos === "Burstable" ? "burstable" : "besteffort"}`;
}

/** "<qos cgroup>/pod<uid>": Guaranteed pods directly under the root. */
export function podCgroupName(root: string, pod: Pod): string {
  return `${qosCgroupName(root, getPodQOS(pod))}/pod${pod.metadata.uid ?? ""}`;
}

/**
 * The QoS cgroups' settings for the active pods, as kubelet's QoS container manager: besteffort
 * gets the minimum shares, burstable the shares of the summed cpu requests of Burstable pods.
 */
export function qosResourceConfigs(active: readonly Pod[]): {
  burstable: ResourceConfig;
  besteffort: ResourceConfig;
} {
  let burstableMilli = 0;
  for (const pod of active) {
    if (getPodQOS(pod) === "Burstable") burstableMilli += podRequests(pod).cpu;
  }
  return {
    burstable: { cpuShares: milliCPUToShares(burstableMilli) },
    besteffort: { cpuShares: MIN_SHARES },
  };
}
