// Resource admission, as kubelet's predicate admit handler: a pod fits when, for each of cpu,
// memory and ephemeral-storage it requests, its request plus the requests of the pods already
// admitted (and not terminated) is within allocatable. The first resource that does not fit is
// the reason: "OutOf<resource>" with "Node didn't have enough resource: ..." as kubelet words it.
import type { Pod } from "../../api/types.ts";
import type { NodeResources } from "./allocatable.ts";
import { type Amounts, addAmounts, podRequests, ZERO } from "./pod-resources.ts";

export interface AdmitFailure {
  reason: string;
  message: string;
}

const checked: { key: keyof Amounts; name: string }[] = [
  { key: "cpu", name: "cpu" },
  { key: "memory", name: "memory" },
  { key: "ephemeralStorage", name: "ephemeral-storage" },
];

export function checkResourceFit(
  pod: Pod,
  active: readonly Pod[],
  allocatable: NodeResources,
): AdmitFailure | undefined {
  const req = podRequests(pod);
  let used: Amounts = ZERO;
  for (const p of active) {
    if (p.metadata.uid !== pod.metadata.uid) used = addAmounts(used, podRequests(p));
  }
  for (const { key, name } of checked) {
    if (req[key] === 0) continue;
    if (req[key] + used[key] <= allocatable[key]) continue;
    return {
      reason: `OutOf${name}`,
      message: `Node didn't have enough resource: ${name}, requested: ${req[key]}, used: ${used[key]}, capacity: ${allocatable[key]}`,
    };
  }
  return undefined;
}
