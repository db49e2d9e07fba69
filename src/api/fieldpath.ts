// The downward API's values, shared by env variables and downwardAPI volume files: a pod field
// (fieldRef) as text, and a container resource (resourceFieldRef) divided by its divisor and
// rounded up. A container with no limit for a resource reads the node's allocatable, as the
// kubelet does.

import { cpuToMilli, memoryToBytes, quantitySign, tryParseQuantity } from "./quantity.ts";
import type { Container, Pod, ResourceFieldSelector } from "./types.ts";

/** What a pod's own spec does not say: where it runs. */
export interface PodFieldContext {
  nodeName: string;
  /** The pod's primary IP ("" while it has none). */
  podIP: string;
  podIPs: string[];
  hostIP: string;
}

const SUBSCRIPT = /^metadata\.(labels|annotations)\['(.+)'\]$/;

/** `key="value"` lines, sorted by key: how the downward API writes labels and annotations. */
function formatFieldMap(m: Record<string, string> | undefined): string {
  return Object.keys(m ?? {})
    .sort()
    .map((k) => `${k}=${JSON.stringify(m?.[k] ?? "")}`)
    .join("\n");
}

/** The value of a fieldRef's fieldPath; throws for a path the downward API does not know. */
export function podFieldValue(pod: Pod, fieldPath: string, ctx: PodFieldContext): string {
  const sub = SUBSCRIPT.exec(fieldPath);
  if (sub) {
    const map = (sub[1] === "labels" ? pod.metadata.labels : pod.metadata.annotations) ?? {};
    const key = sub[2] as string;
    // Own keys only: "valueOf" is no label of every pod.
    return Object.hasOwn(map, key) ? (map[key] ?? "") : "";
  }
  switch (fieldPath) {
    case "metadata.name":
      return pod.metadata.name;
    case "metadata.namespace":
      return pod.metadata.namespace ?? "default";
    case "metadata.uid":
      return pod.metadata.uid ?? "";
    case "metadata.labels":
      return formatFieldMap(pod.metadata.labels);
    case "metadata.annotations":
      return formatFieldMap(pod.metadata.annotations);
    case "spec.nodeName":
      return ctx.nodeName;
    case "spec.serviceAccountName":
      return "";
    case "status.hostIP":
    case "status.hostIPs":
      return ctx.hostIP;
    case "status.podIP":
      return ctx.podIP;
    case "status.podIPs":
      return ctx.podIPs.join(",");
    default:
      throw new Error(`unsupported fieldPath ${JSON.stringify(fieldPath)}`);
  }
}

/** The node's allocatable: cpu in millicores, memory and ephemeral storage in bytes. */
export interface NodeAllocatable {
  cpu: number;
  memory: number;
  ephemeralStorage: number;
}

function findContainer(pod: Pod, name: string): Container {
  const all = [...(pod.spec.initContainers ?? []), ...pod.spec.containers];
  const c = all.find((x) => x.name === name);
  if (!c)
    throw new Error(`container ${JSON.stringify(name)} not found in pod ${pod.metadata.name}`);
  return c;
}

/**
 * A resourceFieldRef's value: the named container's (`self` when the selector names none)
 * request or limit, in units of the divisor, rounded up. A missing limit reads `allocatable`.
 */
export function resourceFieldValue(
  pod: Pod,
  self: Container | undefined,
  ref: ResourceFieldSelector,
  allocatable: NodeAllocatable,
): string {
  const c = ref.containerName ? findContainer(pod, ref.containerName) : self;
  if (!c) throw new Error(`resourceFieldRef ${JSON.stringify(ref.resource)} names no container`);
  const [kind = "", resource = ""] = ref.resource.split(".");
  const list = kind === "limits" ? c.resources?.limits : c.resources?.requests;
  const text = list?.[resource];
  const cpu = resource === "cpu";
  let amount: number;
  if (text !== undefined) amount = cpu ? cpuToMilli(text) : memoryToBytes(text);
  else if (kind !== "limits") amount = 0;
  else if (cpu) amount = allocatable.cpu;
  else if (resource === "memory") amount = allocatable.memory;
  else if (resource === "ephemeral-storage") amount = allocatable.ephemeralStorage;
  else throw new Error(`unsupported container resource: ${ref.resource}`);
  // A zero divisor in any spelling ("0", "0.0", "-0", "0m") means the default, 1.
  const parsed = ref.divisor ? tryParseQuantity(ref.divisor) : undefined;
  const divisorText = parsed !== undefined && quantitySign(parsed) !== 0 ? ref.divisor : "1";
  const divisor = cpu ? cpuToMilli(divisorText ?? "1") : memoryToBytes(divisorText ?? "1");
  return String(Math.ceil(amount / divisor));
}
