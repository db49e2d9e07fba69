// The eviction manager's decisions for one monitoring cycle, as pure functions of (thresholds,
// observations, the previous cycle's state, now), with the kubelet's semantics (synchronize):
//
// - A threshold is met when the signal is below it (memory.stall: at or above it). Once a
//   threshold has acted it stays met until the signal comes back above threshold + minimum
//   reclaim.
// - A met threshold acts only after its grace period (0 for hard thresholds) has passed since it
//   was first seen met without interruption.
// - A node condition is True while one of its signals' thresholds is met (grace period or not),
//   and for the pressure transition period after the last time one was.
// - Of the thresholds that act, memory ones go first; the first one's resource is reclaimed.
import {
  isMemorySignal,
  type Observations,
  type PressureCondition,
  type Resource,
  SIGNAL_CONDITION,
  SIGNAL_RESOURCE,
  type Signal,
} from "../evictionapi/signals.ts";
import { type Threshold, thresholdKey, thresholdQuantity } from "../evictionapi/thresholds.ts";

/** What the manager remembers between cycles. */
export interface EvictionState {
  /** Thresholds that acted last cycle (grace period passed), until reclaim is satisfied. */
  thresholdsMet: readonly Threshold[];
  /** When each met threshold (by thresholdKey) was first seen met, uninterrupted. */
  firstObservedAt: ReadonlyMap<string, number>;
  /** When each pressure condition was last seen triggered by a met threshold. */
  conditionLastObservedAt: ReadonlyMap<PressureCondition, number>;
}

export const INITIAL_STATE: EvictionState = Object.freeze({
  thresholdsMet: [],
  firstObservedAt: new Map(),
  conditionLastObservedAt: new Map(),
});

export interface CycleInput {
  thresholds: readonly Threshold[];
  observations: Observations;
  state: EvictionState;
  /** The monotonic clock (ms): grace and transition periods are durations. */
  now: number;
  pressureTransitionMs: number;
}

export interface CyclePlan {
  state: EvictionState;
  /** The pressure conditions that are True now. */
  conditions: PressureCondition[];
  /** Thresholds whose grace period has passed: the ones to act on, highest priority first. */
  acting: Threshold[];
  /** The threshold whose resource is reclaimed this cycle, if any. */
  reclaim?: { threshold: Threshold; resource: Resource };
}

/** Whether `t` is met by `obs`; with `minReclaim`, against threshold + minimum reclaim. */
function isMet(t: Threshold, obs: Observations, minReclaim: boolean): boolean {
  const o = obs.get(t.signal);
  if (o === undefined) return false;
  if (t.signal === "memory.stall") return o.available >= (t.value.quantity ?? 0);
  let limit = thresholdQuantity(t.value, o.capacity);
  if (minReclaim && t.minReclaim !== undefined)
    limit += thresholdQuantity(t.minReclaim, o.capacity);
  return limit > o.available;
}

/** The thresholds of `list` that `obs` meets. */
export function thresholdsMet(
  list: readonly Threshold[],
  obs: Observations,
  minReclaim: boolean,
): Threshold[] {
  return list.filter((t) => isMet(t, obs, minReclaim));
}

function merge(a: Threshold[], b: readonly Threshold[]): Threshold[] {
  const keys = new Set(a.map(thresholdKey));
  return [...a, ...b.filter((t) => !keys.has(thresholdKey(t)))];
}

/** Memory thresholds first; otherwise the configured order. */
function byEvictionPriority(list: readonly Threshold[]): Threshold[] {
  return [
    ...list.filter((t) => isMemorySignal(t.signal)),
    ...list.filter((t) => !isMemorySignal(t.signal)),
  ];
}

/** One monitoring cycle's decisions. */
export function planCycle(input: CycleInput): CyclePlan {
  const { observations: obs, state, now } = input;
  const met = merge(
    thresholdsMet(input.thresholds, obs, false),
    thresholdsMet(state.thresholdsMet, obs, true),
  );
  const firstObservedAt = new Map<string, number>();
  for (const t of met) {
    const key = thresholdKey(t);
    firstObservedAt.set(key, state.firstObservedAt.get(key) ?? now);
  }
  const lastObserved = new Map(state.conditionLastObservedAt);
  for (const t of met) lastObserved.set(SIGNAL_CONDITION[t.signal], now);
  const conditions = [...lastObserved]
    .filter(([, at]) => now - at < input.pressureTransitionMs || at === now)
    .map(([c]) => c);
  const acting = byEvictionPriority(
    met.filter((t) => now - (firstObservedAt.get(thresholdKey(t)) ?? now) >= t.gracePeriodMs),
  );
  const first = acting[0];
  return {
    state: { thresholdsMet: acting, firstObservedAt, conditionLastObservedAt: lastObserved },
    conditions,
    acting,
    ...(first && { reclaim: { threshold: first, resource: SIGNAL_RESOURCE[first.signal] } }),
  };
}

/** The node-level reclaim steps for a signal, before any pod is evicted (the kubelet's
 * buildSignalToNodeReclaimFuncs): with an image filesystem of its own, images and dead
 * containers free the image filesystem and nothing frees the node's; on one filesystem, both
 * free it. */
export function reclaimSteps(
  signal: Signal,
  dedicatedImageFs: boolean,
): ("containers" | "images")[] {
  if (SIGNAL_CONDITION[signal] !== "DiskPressure") return [];
  if (dedicatedImageFs && signal.startsWith("nodefs.")) return [];
  return ["containers", "images"];
}
