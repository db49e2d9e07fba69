// A pod's device needs: the extended resources in its containers' limits (the API server makes a
// request equal its limit), per container in the order the devices are allocated, and per pod.
// Invariants: counts are whole and above zero (a limit of 0, or one that does not parse, asks for
// nothing); containers come init containers first, in spec order, then app containers.
import { isExtendedResourceName } from "../../../api/extended-resources.ts";
import { integerValue, tryParseQuantity } from "../../../api/quantity.ts";
import type { Container, Pod } from "../../../api/types.ts";

/** How a container's devices are reused (the kubelet's devicesToReuse). */
export type ContainerKind =
  /** A regular init container: it ends before the next starts, so its devices go back to the
   * pod's reuse pool for the containers after it. */
  | "init"
  /** A restartable init container (restartPolicy Always, a sidecar): it keeps its devices. */
  | "sidecar"
  | "app";

interface ContainerNeeds {
  name: string;
  kind: ContainerKind;
  /** Devices per extended resource name. */
  resources: Record<string, number>;
}

export interface PodDeviceNeeds {
  /** Every container asking for devices, in allocation order. */
  containers: ContainerNeeds[];
  /** Distinct devices the whole pod holds per resource, with init containers' devices reused. */
  total: Record<string, number>;
}

/** Devices per extended resource in one container's limits. */
export function containerDeviceNeeds(container: Container): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, value] of Object.entries(container.resources?.limits ?? {})) {
    if (!isExtendedResourceName(name)) continue;
    const q = tryParseQuantity(value);
    if (q === undefined) continue;
    const n = Number(integerValue(q));
    if (n > 0) out[name] = n;
  }
  return out;
}

/** The pod's device needs. The total per resource is what the allocation holds at its peak:
 * the larger of each regular init container's need plus the sidecars started before it, and
 * every sidecar's plus every app container's need (regular init containers' devices are reused). */
export function podDeviceNeeds(pod: Pod): PodDeviceNeeds {
  const containers: ContainerNeeds[] = [];
  const add = (c: Container, kind: ContainerKind) => {
    const resources = containerDeviceNeeds(c);
    if (Object.keys(resources).length > 0) containers.push({ name: c.name, kind, resources });
  };
  for (const c of pod.spec.initContainers ?? [])
    add(c, c.restartPolicy === "Always" ? "sidecar" : "init");
  for (const c of pod.spec.containers) add(c, "app");

  const kept: Record<string, number> = {};
  const peak: Record<string, number> = {};
  for (const c of containers) {
    for (const [name, n] of Object.entries(c.resources)) {
      if (c.kind === "init") peak[name] = Math.max(peak[name] ?? 0, (kept[name] ?? 0) + n);
      else kept[name] = (kept[name] ?? 0) + n;
    }
  }
  const total: Record<string, number> = {};
  for (const name of new Set([...Object.keys(kept), ...Object.keys(peak)]))
    total[name] = Math.max(kept[name] ?? 0, peak[name] ?? 0);
  return { containers, total };
}
