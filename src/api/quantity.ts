// Kubernetes resource quantities (k8s.io/apimachinery/pkg/api/resource), held exactly.
//
//   quantity ::= [+-] number suffix
//   number   ::= digits | digits "." [digits] | "." digits
//   suffix   ::= "" | n | u | m | k | M | G | T | P | E      (decimal SI)
//              | Ki | Mi | Gi | Ti | Pi | Ei                 (binary SI)
//              | (e | E) [+-] digits                         (decimal exponent)
//
// A Quantity's value is exactly `num / 10^scale`; bigint arithmetic keeps "0.1" + "0.2" equal
// to "300m". Conversions to integer units round up (towards +infinity), as Kubernetes does.

export interface Quantity {
  /** Value numerator: value = num / 10^scale. */
  readonly num: bigint;
  /** Non-negative power of ten dividing num. */
  readonly scale: number;
  /** The text the quantity was parsed from (numbers are turned into their decimal text). */
  readonly text: string;
}

export class QuantityParseError extends Error {
  constructor(readonly value: string) {
    super(
      `quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': invalid quantity ${JSON.stringify(value)}`,
    );
    this.name = "QuantityParseError";
  }
}

/** Upper bound on the decimal exponent, far past any real resource and cheap for bigint. */
const MAX_EXPONENT = 100;
const MAX_DIGITS = 100;

const decimalSuffixes: Record<string, number> = {
  n: -9,
  u: -6,
  m: -3,
  "": 0,
  k: 3,
  M: 6,
  G: 9,
  T: 12,
  P: 15,
  E: 18,
};

const binarySuffixes: Record<string, number> = {
  Ki: 10,
  Mi: 20,
  Gi: 30,
  Ti: 40,
  Pi: 50,
  Ei: 60,
};

const numberRe = /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(.*)$/;

function suffixFactors(suffix: string): { exp10: number; exp2: number } | undefined {
  // Own keys only: "toString" is no suffix.
  const dec = Object.hasOwn(decimalSuffixes, suffix) ? decimalSuffixes[suffix] : undefined;
  if (dec !== undefined) return { exp10: dec, exp2: 0 };
  const bin = Object.hasOwn(binarySuffixes, suffix) ? binarySuffixes[suffix] : undefined;
  if (bin !== undefined) return { exp10: 0, exp2: bin };
  const m = /^[eE]([+-]?\d+)$/.exec(suffix);
  if (!m) return undefined;
  const exp = Number(m[1]);
  if (Math.abs(exp) > MAX_EXPONENT) return undefined;
  return { exp10: exp, exp2: 0 };
}

/** Parses a quantity; JSON numbers (e.g. `cpu: 0.5` in YAML) are accepted too. */
export function parseQuantity(input: string | number): Quantity {
  const text = typeof input === "number" ? numberText(input) : input;
  const m = numberRe.exec(text.trim() === text ? text : "");
  if (!m) throw new QuantityParseError(text);
  const [, sign = "", digits = "", suffix = ""] = m;
  const factors = suffixFactors(suffix);
  if (!factors || digits.length > MAX_DIGITS) throw new QuantityParseError(text);
  const [whole = "", frac = ""] = digits.split(".");
  let num = BigInt(`${whole}${frac}` || "0");
  let scale = frac.length - factors.exp10;
  num <<= BigInt(factors.exp2);
  if (scale < 0) {
    num *= 10n ** BigInt(-scale);
    scale = 0;
  }
  if (sign === "-") num = -num;
  return normalize(num, scale, text);
}

function numberText(n: number): string {
  if (!Number.isFinite(n)) throw new QuantityParseError(String(n));
  return String(n);
}

/** Drops trailing zeros of the fraction so equal values have equal (num, scale). */
function normalize(num: bigint, scale: number, text: string): Quantity {
  let n = num;
  let s = scale;
  while (s > 0 && n % 10n === 0n) {
    n /= 10n;
    s -= 1;
  }
  return { num: n, scale: s, text };
}

/** Returns the quantity, or undefined when the text does not parse. */
export function tryParseQuantity(input: string | number): Quantity | undefined {
  try {
    return parseQuantity(input);
  } catch (e) {
    if (e instanceof QuantityParseError) return undefined;
    throw e;
  }
}

function toScale(q: Quantity, scale: number): bigint {
  return q.num * 10n ** BigInt(scale - q.scale);
}

export function compareQuantity(a: Quantity, b: Quantity): -1 | 0 | 1 {
  const scale = Math.max(a.scale, b.scale);
  const x = toScale(a, scale);
  const y = toScale(b, scale);
  return x < y ? -1 : x > y ? 1 : 0;
}

export function addQuantity(a: Quantity, b: Quantity): Quantity {
  const scale = Math.max(a.scale, b.scale);
  const n = normalize(toScale(a, scale) + toScale(b, scale), scale, "");
  return { ...n, text: formatQuantity(n) };
}

export function quantitySign(q: Quantity): -1 | 0 | 1 {
  return q.num < 0n ? -1 : q.num > 0n ? 1 : 0;
}

/** The value scaled by 10^exp10, as an integer rounded up (towards +infinity). */
function scaledCeil(q: Quantity, exp10: number): bigint {
  const shift = exp10 - q.scale;
  if (shift >= 0) return q.num * 10n ** BigInt(shift);
  const div = 10n ** BigInt(-shift);
  const quot = q.num / div;
  return q.num % div > 0n ? quot + 1n : quot;
}

/** The value in thousandths, rounded up: "100m" → 100n, "0.0001" → 1n. */
export function milliValue(q: Quantity): bigint {
  return scaledCeil(q, 3);
}

/** The value as an integer, rounded up: "1.5" → 2n, "1Ki" → 1024n. */
export function integerValue(q: Quantity): bigint {
  return scaledCeil(q, 0);
}

function asQuantity(q: Quantity | string | number): Quantity {
  return typeof q === "object" ? q : parseQuantity(q);
}

/** CPU in millicores, rounded up; exact up to 2^53. Throws QuantityParseError for bad text. */
export function cpuToMilli(q: Quantity | string | number): number {
  return Number(milliValue(asQuantity(q)));
}

/** Memory in bytes, rounded up; exact up to 2^53 (8 PiB). Throws QuantityParseError. */
export function memoryToBytes(q: Quantity | string | number): number {
  return Number(integerValue(asQuantity(q)));
}

/**
 * A short canonical text for a computed quantity: an integer with the largest exact decimal
 * suffix ("1500m", "2", "3k"), or a binary suffix when that is exact and the decimal one is not.
 */
export function formatQuantity(q: Quantity): string {
  if (q.num === 0n) return "0";
  if (q.scale > 0) return formatDecimal(q);
  for (const [suffix, exp2] of Object.entries(binarySuffixes).reverse()) {
    const unit = 1n << BigInt(exp2);
    if (q.num % unit === 0n && q.num % 1000n !== 0n) return `${q.num / unit}${suffix}`;
  }
  return formatDecimal(q);
}

function formatDecimal(q: Quantity): string {
  const choices: [string, number][] = [
    ["E", 18],
    ["P", 15],
    ["T", 12],
    ["G", 9],
    ["M", 6],
    ["k", 3],
    ["", 0],
    ["m", -3],
    ["u", -6],
    ["n", -9],
  ];
  for (const [suffix, exp10] of choices) {
    const shift = q.scale + exp10;
    if (shift <= 0) return `${q.num * 10n ** BigInt(-shift)}${suffix}`;
    const div = 10n ** BigInt(shift);
    if (q.num % div === 0n) return `${q.num / div}${suffix}`;
  }
  const n = scaledCeil(q, 9);
  // Rounded up to whole nanos, it may now have a larger exact suffix ("999.1n" → "1u").
  return n === 0n ? "0" : formatDecimal(normalize(n, 9, ""));
}
