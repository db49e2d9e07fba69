// The kubelet's eviction texts, word for word: the Evicted message of a pod evicted for node
// pressure or for its own local storage, and the admission message under pressure. Quantities
// are printed as the kubelet's resource.Quantity prints them (canonical form: the largest exact
// binary suffix for byte amounts of 1Ki and up, the largest exact decimal one otherwise).
import { memoryToBytes, tryParseQuantity } from "../../api/index.ts";
import type { Container, Pod } from "../../api/types.ts";
import {
  isByteSignal,
  type Observations,
  type Resource,
  SIGNAL_RESOURCE,
} from "../evictionapi/signals.ts";
import { thresholdQuantity } from "../evictionapi/thresholds.ts";
import type { CyclePlan } from "./plan.ts";
import type { PodUsage } from "./usage.ts";

export const EVICTED_REASON = "Evicted";

const BINARY = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
const DECIMAL = ["", "k", "M", "G", "T", "P", "E"];

/** `value` with the largest of `suffixes` (powers of `base`) that divides it exactly. */
function withSuffix(value: number, base: number, suffixes: readonly string[]): string {
  let i = 0;
  let m = value;
  while (i < suffixes.length - 1 && m % base === 0 && m !== 0) {
    m /= base;
    i++;
  }
  return `${m}${suffixes[i]}`;
}

/** An integer amount as a resource.Quantity of that format prints it: binary amounts under 1Ki
 * print as decimal ones. */
export function goQuantity(n: number, format: "binary" | "decimal"): string {
  const value = Math.trunc(n);
  if (format === "binary" && Math.abs(value) >= 1024) return withSuffix(value, 1024, BINARY);
  return withSuffix(value, 1000, DECIMAL);
}

/** A quantity from a spec ("64Mi", "1G") as the kubelet prints the parsed value; "0" if absent. */
export function specQuantity(text: string | undefined): string {
  if (text === undefined) return "0";
  const q = tryParseQuantity(text);
  if (q === undefined) return text;
  return goQuantity(memoryToBytes(q), /[KMGTPE]i$/.test(text.trim()) ? "binary" : "decimal");
}

const amount = (resource: Resource, n: number) =>
  goQuantity(n, resource === "memory" || resource === "ephemeral-storage" ? "binary" : "decimal");

/** "Threshold quantity: 100Mi, available: 51200Ki. " for the first acting threshold of the
 * resource; for the memory stall threshold, the stall and its limit. */
function thresholdText(resource: Resource, plan: CyclePlan, obs: Observations): string {
  for (const t of plan.acting) {
    if (SIGNAL_RESOURCE[t.signal] !== resource) continue;
    const o = obs.get(t.signal);
    if (o === undefined) continue;
    if (t.signal === "memory.stall") {
      return `Memory stall (PSI some avg10): ${o.available.toFixed(2)}%, threshold: ${t.value.text}. `;
    }
    const format = isByteSignal(t.signal) ? "binary" : "decimal";
    const limit = t.value.quantity !== undefined ? specQuantity(t.value.text) : undefined;
    const q = limit ?? goQuantity(thresholdQuantity(t.value, o.capacity), format);
    return `Threshold quantity: ${q}, available: ${goQuantity(o.available, format)}. `;
  }
  return "";
}

function specOf(pod: Pod, name: string): Container | undefined {
  return [...pod.spec.containers, ...(pod.spec.initContainers ?? [])].find((c) => c.name === name);
}

/** The Evicted message of a pod evicted to reclaim `resource` (the kubelet's evictionMessage). */
export function evictionMessage(
  resource: Resource,
  pod: Pod,
  usage: PodUsage | undefined,
  plan: CyclePlan,
  obs: Observations,
): string {
  let message = `The node was low on resource: ${resource}. ${thresholdText(resource, plan, obs)}`;
  if (usage === undefined) return message;
  for (const c of usage.containers) {
    const spec = specOf(pod, c.name);
    if (spec === undefined) continue;
    let used: number | undefined;
    if (resource === "memory") used = c.memory;
    if (resource === "ephemeral-storage" && c.rootfs !== undefined && c.logs !== undefined)
      used = c.rootfs.bytes + c.logs.bytes;
    if (used === undefined) continue;
    const requestText = spec.resources?.requests?.[resource];
    const request = requestText === undefined ? 0 : memoryToBytesOr0(requestText);
    if (used > request) {
      message += `Container ${c.name} was using ${amount(resource, used)}, request is ${specQuantity(requestText)}, has larger consumption of ${resource}. `;
    }
  }
  return message;
}

function memoryToBytesOr0(text: string): number {
  const q = tryParseQuantity(text);
  return q === undefined ? 0 : memoryToBytes(q);
}

export const emptyDirMessage = (volume: string, limit: string): string =>
  `Usage of EmptyDir volume ${JSON.stringify(volume)} exceeds the limit ${JSON.stringify(specQuantity(limit))}. `;

export const podStorageMessage = (limit: string): string =>
  `Pod ephemeral local storage usage exceeds the total limit of containers ${limit}. `;

export const containerStorageMessage = (container: string, limit: string): string =>
  `Container ${container} exceeded its local ephemeral storage limit ${JSON.stringify(specQuantity(limit))}. `;

/** The admission rejection message under pressure: "The node had condition: [DiskPressure]. " */
export const nodeConditionMessage = (conditions: readonly string[]): string =>
  `The node had condition: [${conditions.join(" ")}]. `;
