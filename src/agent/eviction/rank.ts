// The order in which pods are evicted for a signal, as the kubelet ranks them:
// - memory: pods using more than they request first, then lower priority, then the larger
//   usage above the request;
// - disk (bytes or inodes): the same with the pod's local storage in the parts the signal's
//   filesystem holds;
// - PIDs: lower priority first, then more processes.
// A pod with no usage figures ranks first (the kubelet evicts what it cannot measure first).
//
// Priority: spec.priority when set; else the two system priority classes' values; else 0. A pod
// at or above SYSTEM_CRITICAL_PRIORITY is critical and never evicted (see docs/kubelet-
// differences.md: on a fleetlet device every pod is static, and only these are critical).
import type { Pod } from "../../api/types.ts";
import { podRequests } from "../cm/index.ts";
import { isMemorySignal, SIGNAL_RESOURCE, type Signal } from "./signals.ts";
import { type DiskParts, type PodUsage, podDiskUsage } from "./usage.ts";

export const SYSTEM_CRITICAL_PRIORITY = 2_000_000_000;

const CLASS_PRIORITY: Readonly<Record<string, number>> = Object.freeze({
  "system-cluster-critical": SYSTEM_CRITICAL_PRIORITY,
  "system-node-critical": SYSTEM_CRITICAL_PRIORITY + 1000,
});

export function podPriority(pod: Pod): number {
  return pod.spec.priority ?? CLASS_PRIORITY[pod.spec.priorityClassName ?? ""] ?? 0;
}

export function isCriticalPod(pod: Pod): boolean {
  return podPriority(pod) >= SYSTEM_CRITICAL_PRIORITY;
}

/** The pod's memory request in bytes (as admission counts it). */
export function memoryRequest(pod: Pod): number {
  return podRequests(pod).memory;
}

function storageRequest(pod: Pod): number {
  return podRequests(pod).ephemeralStorage;
}

type Usage = (pod: Pod) => PodUsage | undefined;
type Cmp = (a: Pod, b: Pod) => number;

/** True first. */
const cmpBool = (a: boolean, b: boolean): number => (a === b ? 0 : a ? -1 : 1);

const byPriority: Cmp = (a, b) => Math.sign(podPriority(a) - podPriority(b));

/** Pods without figures first; otherwise `cmp` on the figures. */
function measured(usage: Usage, cmp: (a: PodUsage, b: PodUsage, pa: Pod, pb: Pod) => number): Cmp {
  return (a, b) => {
    const ua = usage(a);
    const ub = usage(b);
    if (ua === undefined || ub === undefined) return cmpBool(ua === undefined, ub === undefined);
    return cmp(ua, ub, a, b);
  };
}

function orderBy(pods: readonly Pod[], ...cmps: Cmp[]): Pod[] {
  return [...pods].sort((a, b) => {
    for (const cmp of cmps) {
      const r = cmp(a, b);
      if (r !== 0) return r;
    }
    return 0;
  });
}

export function rankMemory(pods: readonly Pod[], usage: Usage): Pod[] {
  const mem = (u: PodUsage) => u.memory ?? 0;
  return orderBy(
    pods,
    measured(usage, (ua, ub, a, b) =>
      cmpBool(mem(ua) > memoryRequest(a), mem(ub) > memoryRequest(b)),
    ),
    byPriority,
    measured(usage, (ua, ub, a, b) =>
      Math.sign(mem(ub) - memoryRequest(b) - (mem(ua) - memoryRequest(a))),
    ),
  );
}

export function rankDisk(
  pods: readonly Pod[],
  usage: Usage,
  parts: DiskParts,
  inodes: boolean,
): Pod[] {
  const used = (u: PodUsage) => {
    const d = podDiskUsage(u, parts);
    return inodes ? d.inodes : d.bytes;
  };
  // As the kubelet: no pod requests inodes, so for inodes "above its request" is "uses any";
  // the last comparison takes off the ephemeral-storage request in both cases.
  const request = (p: Pod) => (inodes ? 0 : storageRequest(p));
  return orderBy(
    pods,
    measured(usage, (ua, ub, a, b) => cmpBool(used(ua) > request(a), used(ub) > request(b))),
    byPriority,
    measured(usage, (ua, ub, a, b) =>
      Math.sign(used(ub) - storageRequest(b) - (used(ua) - storageRequest(a))),
    ),
  );
}

export function rankPids(pods: readonly Pod[], usage: Usage): Pod[] {
  return orderBy(
    pods,
    byPriority,
    measured(usage, (ua, ub) => Math.sign((ub.processes ?? 0) - (ua.processes ?? 0))),
  );
}

/** The parts of a pod's storage a disk signal measures (the kubelet's buildSignalToRankFunc):
 * with an image filesystem of its own, nodefs counts logs and volumes, imagefs the writable
 * layers; on one filesystem, both count everything. */
export function diskParts(signal: Signal, dedicatedImageFs: boolean): DiskParts {
  if (!dedicatedImageFs) return { rootfs: true, logs: true, volumes: true };
  if (signal.startsWith("imagefs.")) return { rootfs: true, logs: false, volumes: false };
  return { rootfs: false, logs: true, volumes: true };
}

/** The pods in the order to evict them for `signal`. */
export function rankPods(
  signal: Signal,
  pods: readonly Pod[],
  usage: Usage,
  dedicatedImageFs: boolean,
): Pod[] {
  if (isMemorySignal(signal)) return rankMemory(pods, usage);
  if (signal === "pid.available") return rankPids(pods, usage);
  const parts = diskParts(signal, dedicatedImageFs);
  return rankDisk(pods, usage, parts, SIGNAL_RESOURCE[signal] === "inodes");
}
