// Go-style durations ("1h30m", "500ms") and kubectl's human-readable ages.

export class DurationParseError extends Error {
  constructor(
    readonly value: string,
    reason: string,
  ) {
    super(`${reason} in duration ${JSON.stringify(value)}`);
    this.name = "DurationParseError";
  }
}

const unitMs: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

const termRe = /^(\d*)(?:\.(\d*))?([^\d.]+)/;

/** The longest duration Go holds: 2^63-1 nanoseconds (about 292 years), in ms. */
const MAX_DURATION_MS = 9_223_372_036_854.775;
const OUT_OF_RANGE = "value out of range (at most 2562047h47m16.854775807s)";

/**
 * Parses a Go duration (time.ParseDuration syntax: an optional sign, then one or more
 * decimal numbers each with a unit ns, us, µs, ms, s, m or h; "0" alone is allowed) into
 * milliseconds, possibly fractional, at most Go's 2^63-1 ns either way. Throws
 * DurationParseError naming the value.
 */
export function parseDuration(input: string): number {
  let rest = input;
  let sign = 1;
  if (rest.startsWith("-") || rest.startsWith("+")) {
    sign = rest.startsWith("-") ? -1 : 1;
    rest = rest.slice(1);
  }
  if (rest === "0") return 0;
  if (rest === "") throw new DurationParseError(input, "invalid syntax");
  let total = 0;
  while (rest !== "") {
    const m = termRe.exec(rest);
    if (!m) {
      const reason = /^[\d.]+$/.test(rest) ? "missing unit" : "invalid syntax";
      throw new DurationParseError(input, reason);
    }
    const [whole, intPart = "", fracPart = "", unit = ""] = m;
    if (intPart === "" && fracPart === "") throw new DurationParseError(input, "invalid syntax");
    const ms = unitMs[unit];
    if (ms === undefined) throw new DurationParseError(input, `unknown unit "${unit}"`);
    total += Number(`${intPart || "0"}.${fracPart || "0"}`) * ms;
    if (!(total <= MAX_DURATION_MS)) throw new DurationParseError(input, OUT_OF_RANGE);
    rest = rest.slice(whole.length);
  }
  return sign * total;
}

/**
 * A succinct age with 2-3 significant figures, as kubectl prints in AGE columns
 * (duration.HumanDuration): "45s", "119s", "3m20s", "15m", "5h3m", "30h", "3d4h", "45d",
 * "2y30d". Up to two seconds in the future reads "0s" (clock skew); more is "<invalid>".
 */
export function humanDuration(ms: number): string {
  if (Number.isNaN(ms)) return "<invalid>";
  const seconds = Math.trunc(ms / 1000);
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.trunc(seconds / 60);
  if (minutes < 10) return joinUnits(minutes, "m", seconds % 60, "s");
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.trunc(minutes / 60);
  if (hours < 8) return joinUnits(hours, "h", minutes % 60, "m");
  if (hours < 48) return `${hours}h`;
  const days = Math.trunc(hours / 24);
  if (days < 8) return joinUnits(days, "d", hours % 24, "h");
  if (days < 365 * 2) return `${days}d`;
  const years = Math.trunc(days / 365);
  if (years < 8) return joinUnits(years, "y", days % 365, "d");
  return `${years}y`;
}

/**
 * A one-unit age (duration.ShortHumanDuration): "45s", "5m", "3h", "12d", "2y".
 */
export function shortHumanDuration(ms: number): string {
  if (Number.isNaN(ms)) return "<invalid>";
  const seconds = Math.trunc(ms / 1000);
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.trunc(seconds / 60);
  if (minutes < 60) return `${minutes}m`;
  const hours = Math.trunc(minutes / 60);
  if (hours < 24) return `${hours}h`;
  if (hours < 24 * 365) return `${Math.trunc(hours / 24)}d`;
  return `${Math.trunc(hours / 24 / 365)}y`;
}

function joinUnits(major: number, majorUnit: string, minor: number, minorUnit: string): string {
  return minor === 0 ? `${major}${majorUnit}` : `${major}${majorUnit}${minor}${minorUnit}`;
}
