// Properties of systemd units as StartTransientUnit and SetUnitProperties take them: a name and
// a variant whose type systemd requires (a wrong type fails the call with "Invalid argument").
// Only the properties the cgroup driver sets are known here, each with its D-Bus type.
import { Variant } from "./types.ts";

/** A unit property as systemd's a(sv) holds it: its name and typed value. */
export type UnitProperty = [name: string, value: Variant];

/** systemd's "infinity" for the t-typed limits (MemoryMax, TasksMax, CPUQuotaPerSecUSec, …). */
export const UNLIMITED = 2n ** 64n - 1n;

const SIGNATURES = {
  Description: "s",
  /** A slice's parent is wanted (the name already places it); a scope is put in Slice. */
  Wants: "as",
  Slice: "s",
  DefaultDependencies: "b",
  Delegate: "b",
  MemoryAccounting: "b",
  CPUAccounting: "b",
  IOAccounting: "b",
  TasksAccounting: "b",
  /** cgroup v2 memory.max. */
  MemoryMax: "t",
  /** cgroup v1 memory.limit_in_bytes. */
  MemoryLimit: "t",
  /** cgroup v2 cpu.weight (1–10000). */
  CPUWeight: "t",
  /** cgroup v1 cpu.shares (2–262144). */
  CPUShares: "t",
  /** CPU time a second, in µs; systemd keeps it as a whole percentage (10 ms steps). */
  CPUQuotaPerSecUSec: "t",
  CPUQuotaPeriodUSec: "t",
  TasksMax: "t",
  /** cgroup v2 cpuset.cpus as a bitmask, CPU n at bit n % 8 of byte n / 8 (systemd ≥ 244). */
  AllowedCPUs: "ay",
  /** Processes to move into a new scope. */
  PIDs: "au",
} as const;

type Signatures = typeof SIGNATURES;
export type UnitPropertyName = keyof Signatures;
type JsOf<S> = S extends "s"
  ? string
  : S extends "as"
    ? string[]
    : S extends "b"
      ? boolean
      : S extends "t"
        ? bigint
        : S extends "au" | "ay"
          ? number[]
          : never;

/** A unit property with the D-Bus type systemd wants for `name`. */
export function unitProperty<K extends UnitPropertyName>(
  name: K,
  value: JsOf<Signatures[K]>,
): UnitProperty {
  return [name, new Variant(SIGNATURES[name], value)];
}

/**
 * CPUQuotaPerSecUSec for a CFS quota of `quotaUs` in every `periodUs`: µs of CPU a second,
 * rounded up to the next 10 ms, because systemd keeps the quota as a whole percentage and a
 * value rounded down would throttle a child cgroup below its own quota. A quota ≤ 0 is no
 * limit.
 */
export function cpuQuotaPerSecUSec(quotaUs: number, periodUs = 100_000): bigint {
  if (quotaUs <= 0 || periodUs <= 0) return UNLIMITED;
  const perSec = (BigInt(Math.trunc(quotaUs)) * 1_000_000n) / BigInt(Math.trunc(periodUs));
  const step = 10_000n;
  if (perSec === 0n) return step;
  return perSec % step === 0n ? perSec : (perSec / step + 1n) * step;
}
