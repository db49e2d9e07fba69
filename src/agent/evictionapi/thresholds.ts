// Eviction thresholds from the agent config, with the kubelet's rules (ParseThresholdConfig):
// a threshold is a quantity or a percentage of the signal's capacity; "0%" and "100%" turn a
// threshold off; a quantity must be positive; every soft threshold needs a grace period; a
// minimum reclaim is a quantity ≥ 0 or a percentage > 0; the hard memory.available threshold is
// applied to the pods' cgroup too (allocatableMemory.available) when pods have cgroups.
//
// Percentages are held as the kubelet holds them, a 32-bit float fraction, so that thresholds
// computed from them are the kubelet's to the byte.
import { memoryToBytes, parseDuration, tryParseQuantity } from "../../api/index.ts";
import { CONFIG_SIGNALS, type ConfigSignal, type Signal } from "./signals.ts";

/** A quantity (bytes, inodes or PIDs) or a fraction of the signal's capacity. */
export interface ThresholdValue {
  quantity?: number;
  /** A fraction in [0, 1], rounded to a 32-bit float as the kubelet parses it. */
  percentage?: number;
  /** As written, e.g. "100Mi" or "10%". */
  text: string;
}

export interface Threshold {
  signal: Signal;
  value: ThresholdValue;
  /** How long the threshold must hold before it acts; 0 for a hard threshold. */
  gracePeriodMs: number;
  /** How far above the threshold the signal must come back before the threshold is let go. */
  minReclaim?: ThresholdValue;
}

/** The agent config fields the thresholds come from (durations already in ms). */
export interface EvictionThresholdSettings {
  evictionHard: Readonly<Record<string, string>>;
  evictionSoft: Readonly<Record<string, string>>;
  evictionSoftGracePeriod: Readonly<Record<string, number>>;
  evictionMinimumReclaim: Readonly<Record<string, string>>;
  /** fleetlet's memory PSI threshold ("25%"); absent: off. */
  evictionMemoryStall?: string;
}

const PERCENT_RE = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?%$/;

/** "10%" → 0.1 as a 32-bit float, as the kubelet's parsePercentage; undefined if malformed. */
export function parsePercentage(text: string): number | undefined {
  if (!PERCENT_RE.test(text)) return undefined;
  return Math.fround(Math.fround(Number(text.slice(0, -1))) / 100);
}

// The check* functions return what is wrong with a value ("must be greater than 0"), to be
// written after the field and the value.

/** Why `text` is not a usable threshold, or its value (undefined: the threshold is off). */
export function checkThresholdValue(
  text: string,
): { value: ThresholdValue | undefined } | { error: string } {
  if (text.endsWith("%")) {
    if (text === "0%" || text === "100%") return { value: undefined };
    const p = parsePercentage(text);
    if (p === undefined) return { error: `is not a percentage (e.g. "10%")` };
    if (p < 0) return { error: `must not be negative` };
    if (p > 1) return { error: `must be at most 100%` };
    return { value: { percentage: p, text } };
  }
  const q = tryParseQuantity(text);
  if (q === undefined) return { error: `is not a quantity or a percentage (e.g. "100Mi", "10%")` };
  if (q.num <= 0n) return { error: `must be greater than 0` };
  return { value: { quantity: memoryToBytes(q), text } };
}

/** Why `text` is not a usable minimum reclaim, or its value. */
export function checkMinReclaim(text: string): { value: ThresholdValue } | { error: string } {
  if (text.endsWith("%")) {
    const p = parsePercentage(text);
    if (p === undefined) return { error: `is not a percentage (e.g. "5%")` };
    if (!(p > 0)) return { error: `must be greater than 0%` };
    if (p > 1) return { error: `must be at most 100%` };
    return { value: { percentage: p, text } };
  }
  const q = tryParseQuantity(text);
  if (q === undefined) return { error: `is not a quantity or a percentage (e.g. "500Mi", "5%")` };
  if (q.num < 0n) return { error: `must not be negative` };
  return { value: { quantity: memoryToBytes(q), text } };
}

/** Why `text` is not a memory stall threshold ("25%": PSI some avg10 at or above 25 %); its
 * value is the percentage as a quantity (the signal's unit is percent). */
export function checkStall(text: string): { value: ThresholdValue } | { error: string } {
  const n = PERCENT_RE.test(text) ? Number(text.slice(0, -1)) : Number.NaN;
  if (!(n > 0 && n <= 100))
    return { error: 'is not a percentage above 0% and at most 100% (e.g. "25%")' };
  return { value: { quantity: n, text } };
}

/** A Go duration ("1m30s") in ms, or why not. */
export function checkGracePeriod(text: string): { ms: number } | { error: string } {
  try {
    const ms = parseDuration(text);
    if (ms < 0) return { error: "must not be negative" };
    return { ms };
  } catch {
    return { error: 'is not a duration (e.g. "30s", "1m30s")' };
  }
}

export function isConfigSignal(name: string): name is ConfigSignal {
  return (CONFIG_SIGNALS as readonly string[]).includes(name);
}

/** The threshold in the signal's unit for a capacity (kubelet's GetThresholdQuantity). */
export function thresholdQuantity(value: ThresholdValue, capacity: number): number {
  if (value.quantity !== undefined) return value.quantity;
  return Math.trunc(capacity * (value.percentage ?? 0));
}

export const isHardThreshold = (t: Threshold): boolean => t.gracePeriodMs === 0;

/** Identity of a threshold across cycles (the kubelet keys its maps by the whole threshold). */
export function thresholdKey(t: Threshold): string {
  return `${t.signal}<${t.value.text}@${t.gracePeriodMs}`;
}

/**
 * The thresholds the manager enforces, hard first, each list in signal order. Throws an Error
 * naming the field and value for anything the schema let through unchecked (callers give it
 * checked settings; this is the last line).
 */
export function buildThresholds(
  s: EvictionThresholdSettings,
  opts: { podCgroups: boolean },
): Threshold[] {
  const out: Threshold[] = [];
  for (const field of [
    "evictionHard",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "evictionMinimumReclaim",
  ] as const) {
    const unknown = Object.keys(s[field]).find((k) => !isConfigSignal(k));
    if (unknown !== undefined) throw new Error(`${field}.${unknown}: unknown eviction signal`);
  }
  const add = (field: string, signal: ConfigSignal, text: string, gracePeriodMs: number) => {
    const checked = checkThresholdValue(text);
    if ("error" in checked)
      throw new Error(`${field}.${signal}: ${JSON.stringify(text)} ${checked.error}`);
    if (checked.value === undefined) return;
    const t: Threshold = { signal, value: checked.value, gracePeriodMs };
    const reclaim = s.evictionMinimumReclaim[signal];
    if (reclaim !== undefined) {
      const r = checkMinReclaim(reclaim);
      if ("error" in r)
        throw new Error(`evictionMinimumReclaim.${signal}: ${JSON.stringify(reclaim)} ${r.error}`);
      t.minReclaim = r.value;
    }
    out.push(t);
  };
  for (const signal of CONFIG_SIGNALS) {
    const text = s.evictionHard[signal];
    if (text !== undefined) add("evictionHard", signal, text, 0);
  }
  for (const signal of CONFIG_SIGNALS) {
    const text = s.evictionSoft[signal];
    if (text === undefined) continue;
    const grace = s.evictionSoftGracePeriod[signal];
    if (grace === undefined)
      throw new Error(
        `evictionSoftGracePeriod: a grace period must be given for the soft eviction threshold ${signal}`,
      );
    add("evictionSoft", signal, text, grace);
  }
  const memory = out.find((t) => t.signal === "memory.available" && isHardThreshold(t));
  if (memory !== undefined && opts.podCgroups)
    out.push({ ...memory, signal: "allocatableMemory.available" });
  if (s.evictionMemoryStall !== undefined) {
    const stall = checkStall(s.evictionMemoryStall);
    if ("error" in stall)
      throw new Error(
        `evictionMemoryStall: ${JSON.stringify(s.evictionMemoryStall)} ${stall.error}`,
      );
    out.push({ signal: "memory.stall", value: stall.value, gracePeriodMs: 0 });
  }
  return out;
}
