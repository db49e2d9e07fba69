// The order in which pods are evicted for a signal, as the kubelet ranks them:
// - memory: pods using more than they request first, then lower priority, then the larger
//   usage above the request;
// - disk (bytes or inodes): the same with the pod's local storage in the parts the signal's
//   filesystem holds;
// - PIDs: lower priority first, then more processes.
// A pod with no usage figures ranks first (the kubelet evicts what it cannot measure first).
// Each pod's sort key is computed once (the kubelet compares pods pairwise, recomputing).
//
// Priority: spec.priority when set; else the two system priority classes' values; else 0. A pod
// at or above SYSTEM_CRITICAL_PRIORITY is critical and never evicted (see docs/kubelet-
// differences.md: on a fleetlet device every pod is static, and only these are critical).
import type { Pod } from "../../api/types.ts";
import { memoizeFrozen } from "../../util/freeze.ts";
import { type Amounts, podRequests } from "../cm/index.ts";
import { isMemorySignal, SIGNAL_RESOURCE, type Signal } from "../evictionapi/signals.ts";
import { type DiskParts, type PodUsage, podDiskUsage } from "./usage.ts";

const SYSTEM_CRITICAL_PRIORITY = 2_000_000_000;

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

type Usage = (pod: Pod) => PodUsage | undefined;

/** A pod's requests, parsed once per (frozen) pod object: every ranking reads all pods'. */
const requestsOf: (pod: Pod) => Amounts = memoizeFrozen(podRequests);

/** Sorts by each pod's key, element by element, lowest first. */
function orderByKey(pods: readonly Pod[], key: (pod: Pod) => number[]): Pod[] {
  const keyed = pods.map((pod) => ({ pod, key: key(pod) }));
  keyed.sort((a, b) => {
    for (let i = 0; i < a.key.length; i++) {
      const d = (a.key[i] ?? 0) - (b.key[i] ?? 0);
      if (d !== 0) return d;
    }
    return 0;
  });
  return keyed.map((k) => k.pod);
}

/** The key of the kubelet's "over its request, then priority, then usage above the request"
 * orders: pods without figures first (compared by priority alone among themselves). */
function overRequestKey(pod: Pod, used: number | undefined, request: number, over: number) {
  if (used === undefined) return [0, 0, podPriority(pod), 0];
  return [1, used > over ? 0 : 1, podPriority(pod), -(used - request)];
}

function rankMemory(pods: readonly Pod[], usage: Usage): Pod[] {
  return orderByKey(pods, (pod) => {
    const u = usage(pod);
    const request = requestsOf(pod).memory;
    return overRequestKey(pod, u === undefined ? undefined : (u.memory ?? 0), request, request);
  });
}

function rankDisk(pods: readonly Pod[], usage: Usage, parts: DiskParts, inodes: boolean): Pod[] {
  // As the kubelet: no pod requests inodes, so for inodes "over its request" is "uses any"; the
  // last comparison takes off the ephemeral-storage request in both cases.
  return orderByKey(pods, (pod) => {
    const u = usage(pod);
    const request = requestsOf(pod).ephemeralStorage;
    const d = u === undefined ? undefined : podDiskUsage(u, parts);
    const used = d === undefined ? undefined : inodes ? d.inodes : d.bytes;
    return overRequestKey(pod, used, request, inodes ? 0 : request);
  });
}

function rankPids(pods: readonly Pod[], usage: Usage): Pod[] {
  return orderByKey(pods, (pod) => {
    const u = usage(pod);
    return [podPriority(pod), u === undefined ? 0 : 1, -(u?.processes ?? 0)];
  });
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
