// Per-pod local storage limits (the kubelet's LocalStorageCapacityIsolation), checked every
// monitoring cycle whatever the node's pressure, in the kubelet's order: an emptyDir over its
// sizeLimit, then the pod's total over the sum of its containers' ephemeral-storage limits,
// then one container (its logs, and its writable layer unless the image filesystem is a
// separate one) over its own limit. Memory-backed emptyDirs count against memory, not here.
import { memoryToBytes, tryParseQuantity } from "../../api/index.ts";
import type { Pod } from "../../api/types.ts";
import {
  containerStorageMessage,
  emptyDirMessage,
  goQuantity,
  podStorageMessage,
} from "./message.ts";
import { type PodUsage, podEphemeralStorage } from "./usage.ts";

function bytesOf(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const q = tryParseQuantity(text);
  return q === undefined ? undefined : memoryToBytes(q);
}

/** Whether the pod has a limit this check enforces (only those pods need their usage read). */
export function hasLocalStorageLimit(pod: Pod): boolean {
  const sized = (pod.spec.volumes ?? []).some(
    (v) =>
      v.emptyDir !== undefined &&
      v.emptyDir.medium !== "Memory" &&
      (bytesOf(v.emptyDir.sizeLimit) ?? 0) > 0,
  );
  return (
    sized ||
    pod.spec.containers.some((c) => c.resources?.limits?.["ephemeral-storage"] !== undefined)
  );
}

/** A violation: the Evicted message and the kubelet's metric label of the limit. */
export interface Violation {
  message: string;
  limit: "emptydirfs.limit" | "ephemeralpodfs.limit" | "ephemeralcontainerfs.limit";
}

function emptyDirViolation(pod: Pod, usage: PodUsage): Violation | undefined {
  for (const v of pod.spec.volumes ?? []) {
    const limit = bytesOf(v.emptyDir?.sizeLimit);
    const used = usage.volumes.get(v.name)?.bytes;
    if (limit === undefined || limit <= 0 || used === undefined || used <= limit) continue;
    return {
      message: emptyDirMessage(v.name, v.emptyDir?.sizeLimit ?? ""),
      limit: "emptydirfs.limit",
    };
  }
  return undefined;
}

function podLimitViolation(pod: Pod, usage: PodUsage): Violation | undefined {
  const limits = pod.spec.containers.map((c) => c.resources?.limits?.["ephemeral-storage"]);
  const first = limits.find((l) => l !== undefined);
  if (first === undefined) return undefined;
  const total = limits.reduce((sum, l) => sum + (bytesOf(l) ?? 0), 0);
  if (podEphemeralStorage(usage) <= total) return undefined;
  const format = /[KMGTPE]i$/.test(first.trim()) ? "binary" : "decimal";
  return { message: podStorageMessage(goQuantity(total, format)), limit: "ephemeralpodfs.limit" };
}

function containerLimitViolation(
  pod: Pod,
  usage: PodUsage,
  dedicatedImageFs: boolean,
): Violation | undefined {
  for (const c of usage.containers) {
    const text = pod.spec.containers.find((s) => s.name === c.name)?.resources?.limits?.[
      "ephemeral-storage"
    ];
    const limit = bytesOf(text);
    if (text === undefined || limit === undefined || limit === 0) continue;
    let used = c.logs?.bytes ?? 0;
    if (!dedicatedImageFs) used += c.rootfs?.bytes ?? 0;
    if (used > limit)
      return {
        message: containerStorageMessage(c.name, text),
        limit: "ephemeralcontainerfs.limit",
      };
  }
  return undefined;
}

/** Why to evict `pod`, if it is over one of its local storage limits. */
export function localStorageViolation(
  pod: Pod,
  usage: PodUsage,
  dedicatedImageFs: boolean,
): Violation | undefined {
  return (
    emptyDirViolation(pod, usage) ??
    podLimitViolation(pod, usage) ??
    containerLimitViolation(pod, usage, dedicatedImageFs)
  );
}
