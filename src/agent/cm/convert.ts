// Conversions between kubelet's resource units and cgroup files, v1 and v2.
//
// cpu.weight (v2) from cpu shares (v1): runtimes in the field use one of two formulas, so a
// weight read back is accepted when either formula gives it:
// - linear (kubelet's own, older runc): 1 + ((shares - 2) × 9999) / 262142
// - quadratic over log2 (newer runc): ceil(10^((l² + 125·l) / 612 − 7/34)), l = log2(shares),
//   which keeps the default 1024 shares at weight 100.

export const MIN_SHARES = 2;
const MAX_SHARES = 262_144;
const MAX_WEIGHT = 10_000;
export const QUOTA_PERIOD_US = 100_000;
const MIN_QUOTA_US = 1_000;

/** kubelet's MilliCPUToShares: 2 for 0, at least 2, at most 262144. */
export function milliCPUToShares(milliCPU: number): number {
  if (milliCPU <= 0) return MIN_SHARES;
  const shares = Math.trunc((milliCPU * 1024) / 1000);
  return Math.min(MAX_SHARES, Math.max(MIN_SHARES, shares));
}

/** kubelet's MilliCPUToQuota: 0 (no quota) for 0, else at least 1 ms over `periodUs`. */
export function milliCPUToQuota(milliCPU: number, periodUs = QUOTA_PERIOD_US): number {
  if (milliCPU <= 0) return 0;
  return Math.max(MIN_QUOTA_US, Math.trunc((milliCPU * periodUs) / 1000));
}

/** The linear shares → cpu.weight conversion (kubelet's, older runc). */
export function sharesToWeightLinear(shares: number): number {
  if (shares <= 0) return 0;
  if (shares >= MAX_SHARES) return MAX_WEIGHT;
  return 1 + Math.trunc(((Math.max(shares, MIN_SHARES) - 2) * 9999) / 262_142);
}

/** The quadratic-log shares → cpu.weight conversion (newer runc). */
export function sharesToWeightQuadratic(shares: number): number {
  if (shares <= 0) return 0;
  if (shares <= MIN_SHARES) return 1;
  if (shares >= MAX_SHARES) return MAX_WEIGHT;
  const l = Math.log2(shares);
  const exponent = (l * l + 125 * l) / 612 - 7 / 34;
  return Math.ceil(10 ** exponent);
}

/** Whether a cpu.weight read back is what either formula gives for `shares`. */
export function weightMatchesShares(weight: number, shares: number): boolean {
  return weight === sharesToWeightLinear(shares) || weight === sharesToWeightQuadratic(shares);
}

/** The cpu.max text: "<quota> <period>", or "max <period>" for no quota (quota ≤ 0). */
export function cpuMaxText(quotaUs: number | undefined, periodUs: number | undefined): string {
  const period = periodUs !== undefined && periodUs > 0 ? periodUs : QUOTA_PERIOD_US;
  return quotaUs !== undefined && quotaUs > 0 ? `${quotaUs} ${period}` : `max ${period}`;
}

/** Parses cpu.max: quota undefined for "max". Throws on anything else. */
export function parseCpuMax(text: string): { quotaUs?: number; periodUs: number } {
  const [q = "", p = ""] = text.trim().split(/\s+/);
  const periodUs = Number(p);
  if (!Number.isInteger(periodUs) || periodUs <= 0)
    throw new Error(`cpu.max ${JSON.stringify(text)} has no valid period`);
  if (q === "max") return { periodUs };
  const quotaUs = Number(q);
  if (!Number.isInteger(quotaUs))
    throw new Error(`cpu.max ${JSON.stringify(text)} has no valid quota`);
  return { quotaUs, periodUs };
}

/** A v2 limit file's text (memory.max, pids.max): "max" for unlimited (≤ 0). */
export function limitText(value: number): string {
  return value > 0 ? String(value) : "max";
}

/** "key value" lines (cpu.stat, memory.stat, cgroup.events) into a map of numbers. */
export function parseFlatKeyed(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    const [k, v] = line.trim().split(/\s+/);
    if (k && v !== undefined && v !== "" && Number.isFinite(Number(v))) out.set(k, Number(v));
  }
  return out;
}

/** PSI text ("some avg10=0.00 avg60=... total=N" / "full ..."): the avg10 and total of each. */
export function parsePressure(text: string): {
  some?: { avg10: number; total: number };
  full?: { avg10: number; total: number };
} {
  const out: ReturnType<typeof parsePressure> = {};
  for (const line of text.split("\n")) {
    const [kind, ...fields] = line.trim().split(/\s+/);
    if (kind !== "some" && kind !== "full") continue;
    const kv = new Map(fields.map((f) => f.split("=") as [string, string]));
    out[kind] = { avg10: Number(kv.get("avg10") ?? 0), total: Number(kv.get("total") ?? 0) };
  }
  return out;
}
