// Pod QoS class, with the rules of kubelet's pkg/apis/core/v1/helper/qos.

import { memoizeFrozen } from "../util/freeze.ts";
import {
  addQuantity,
  compareQuantity,
  type Quantity,
  quantitySign,
  tryParseQuantity,
} from "./quantity.ts";
import type { Container, Pod, PodQOSClass, ResourceList } from "./types.ts";

const qosResources = ["cpu", "memory"] as const;
type QOSResource = (typeof qosResources)[number];
type Totals = Map<QOSResource, Quantity>;

/** Adds the positive cpu and memory quantities of `list` into `totals`; returns those found. */
function accumulate(list: ResourceList | undefined, totals: Totals): Set<QOSResource> {
  const found = new Set<QOSResource>();
  for (const name of qosResources) {
    const text = list?.[name];
    const q = text === undefined ? undefined : tryParseQuantity(text);
    if (!q || quantitySign(q) <= 0) continue;
    found.add(name);
    const prev = totals.get(name);
    totals.set(name, prev ? addQuantity(prev, q) : q);
  }
  return found;
}

/**
 * The pod's QoS class. BestEffort: no container (init or app) sets a positive cpu or memory
 * request or limit. Guaranteed: every container sets positive cpu and memory limits and, summed
 * over all containers, cpu and memory requests equal limits. Otherwise Burstable. Other
 * resources, unparseable and zero quantities are ignored. Apply defaults first so that
 * requests copied from limits are counted.
 */
export const getPodQOS: (pod: Pod) => PodQOSClass = memoizeFrozen(computePodQOS);

function computePodQOS(pod: Pod): PodQOSClass {
  const requests: Totals = new Map();
  const limits: Totals = new Map();
  let guaranteed = true;
  const all: Container[] = [...pod.spec.containers, ...(pod.spec.initContainers ?? [])];
  for (const c of all) {
    accumulate(c.resources?.requests, requests);
    const found = accumulate(c.resources?.limits, limits);
    if (!found.has("cpu") || !found.has("memory")) guaranteed = false;
  }
  if (requests.size === 0 && limits.size === 0) return "BestEffort";
  if (!guaranteed || requests.size !== limits.size) return "Burstable";
  for (const [name, req] of requests) {
    const lim = limits.get(name);
    if (!lim || compareQuantity(lim, req) !== 0) return "Burstable";
  }
  return "Guaranteed";
}
