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

/** A disk-backed emptyDir with a sizeLimit (the volume manager's diskEmptyDirLimits). */
export interface EmptyDirLimit {
  volume: string;
  limitBytes: number;
}

/** The pod's disk-backed emptyDirs with a sizeLimit, read from its spec. */
export function specEmptyDirLimits(pod: Pod): EmptyDirLimit[] {
  return (pod.spec.volumes ?? []).flatMap((v) => {
    if (v.emptyDir === undefined || v.emptyDir.medium === "Memory") return [];
    const limitBytes = bytesOf(v.emptyDir.sizeLimit) ?? 0;
    return limitBytes > 0 ? [{ volume: v.name, limitBytes }] : [];
  });
}

/** Whether the pod has a limit this check enforces (only those pods need their usage read). */
export function hasLocalStorageLimit(pod: Pod, emptyDirs: readonly EmptyDirLimit[]): boolean {
  return (
    emptyDirs.length > 0 ||
    pod.spec.containers.some((c) => c.resources?.limits?.["ephemeral-storage"] !== undefined)
  );
}

/** A violation: the Evicted message and the kubelet's metric label of the limit. */
export interface Violation {
  message: string;
  limit: "emptydirfs.limit" | "ephemeralpodfs.limit" | "ephemeralcontainerfs.limit";
}

function emptyDirViolation(
  pod: Pod,
  usage: PodUsage,
  emptyDirs: readonly EmptyDirLimit[],
): Violation | undefined {
  for (const { volume, limitBytes } of emptyDirs) {
    const used = usage.volumes.get(volume)?.bytes;
    if (used === undefined || used <= limitBytes) continue;
    const text = pod.spec.volumes?.find((v) => v.name === volume)?.emptyDir?.sizeLimit;
    return {
      message: emptyDirMessage(volume, text ?? goQuantity(limitBytes, "binary")),
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
  emptyDirs: readonly EmptyDirLimit[] = specEmptyDirLimits(pod),
): Violation | undefined {
  return (
    emptyDirViolation(pod, usage, emptyDirs) ??
    podLimitViolation(pod, usage) ??
    containerLimitViolation(pod, usage, dedicatedImageFs)
  );
}
