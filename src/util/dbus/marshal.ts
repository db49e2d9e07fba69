// Writing D-Bus values, in little-endian byte order unless asked otherwise (we send
// little-endian; peers may write either, and tests write both). Offsets are counted from the start of the buffer, which the caller places at
// an 8-byte boundary of the message, so alignment here is alignment in the message.
import {
  alignment,
  DBusEncodeError,
  type DBusValue,
  type DType,
  isObjectPath,
  parseSignature,
  signatureOf,
  singleType,
  Variant,
} from "./types.ts";

const utf8 = new TextEncoder();

/** A growing little-endian buffer. */
export class Writer {
  constructor(
    /** Little-endian (what we send), or big-endian (for tests of the reader). */
    readonly little = true,
  ) {}

  private buf = new Uint8Array(256);
  private view = new DataView(this.buf.buffer);
  /** Bytes written so far. */
  length = 0;

  private reserve(n: number): void {
    if (this.length + n <= this.buf.length) return;
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.length + n));
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }

  /** Writes zero bytes up to the next multiple of `n`. */
  pad(n: number): void {
    const to = Math.ceil(this.length / n) * n;
    this.reserve(to - this.length);
    this.buf.fill(0, this.length, to);
    this.length = to;
  }

  u8(v: number): void {
    this.reserve(1);
    this.buf[this.length++] = v;
  }

  fixed(code: "n" | "q" | "i" | "u" | "d", v: number): void {
    const size = code === "n" || code === "q" ? 2 : code === "d" ? 8 : 4;
    this.pad(size);
    this.reserve(size);
    const at = this.length;
    if (code === "n") this.view.setInt16(at, v, this.little);
    else if (code === "q") this.view.setUint16(at, v, this.little);
    else if (code === "i") this.view.setInt32(at, v, this.little);
    else if (code === "u") this.view.setUint32(at, v, this.little);
    else this.view.setFloat64(at, v, this.little);
    this.length += size;
  }

  big(code: "x" | "t", v: bigint): void {
    this.pad(8);
    this.reserve(8);
    if (code === "x") this.view.setBigInt64(this.length, v, this.little);
    else this.view.setBigUint64(this.length, v, this.little);
    this.length += 8;
  }

  /** Sets a u32 already written at `at` (an array's length once its elements are written). */
  patchU32(at: number, v: number): void {
    this.view.setUint32(at, v, this.little);
  }

  bytes(b: Uint8Array): void {
    this.reserve(b.length);
    this.buf.set(b, this.length);
    this.length += b.length;
  }

  /** The bytes written (a view; copy it before writing more). */
  result(): Uint8Array {
    return this.buf.subarray(0, this.length);
  }
}

/** Most bytes in one array's elements, by the specification. */
export const MAX_ARRAY_BYTES = 64 * 1024 * 1024;

const RANGES: Record<string, [number, number]> = {
  y: [0, 0xff],
  n: [-0x8000, 0x7fff],
  q: [0, 0xffff],
  i: [-0x80000000, 0x7fffffff],
  u: [0, 0xffffffff],
};

function bad(t: DType, v: unknown, why = ""): never {
  const shown = typeof v === "bigint" ? `${v}n` : (JSON.stringify(v) ?? String(v));
  throw new DBusEncodeError(`value ${shown} is not of type ${signatureOf(t)}${why}`);
}

function writeInteger(w: Writer, code: "y" | "n" | "q" | "i" | "u", v: unknown) {
  const [lo, hi] = RANGES[code] ?? [0, 0];
  if (typeof v !== "number" || !Number.isInteger(v) || v < lo || v > hi) bad({ code }, v);
  if (code === "y") w.u8(v);
  else w.fixed(code, v);
}

function writeBig(w: Writer, code: "x" | "t", v: unknown) {
  if (typeof v !== "bigint") bad({ code }, v);
  const fits = code === "x" ? BigInt.asIntN(64, v) === v : BigInt.asUintN(64, v) === v;
  if (!fits) bad({ code }, v);
  w.big(code, v);
}

function writeString(w: Writer, t: DType, v: unknown) {
  if (typeof v !== "string" || v.includes("\0")) bad(t, v);
  if (!v.isWellFormed()) bad(t, v, " (it has an unpaired surrogate, which UTF-8 cannot hold)");
  if (t.code === "o" && !isObjectPath(v)) bad(t, v, " (an object path)");
  const b = utf8.encode(v);
  if (t.code === "g") {
    parseSignature(v);
    w.u8(b.length);
  } else {
    w.fixed("u", b.length);
  }
  w.bytes(b);
  w.u8(0);
}

function writeArray(w: Writer, t: DType & { code: "a" }, v: unknown, depth: number) {
  if (!Array.isArray(v)) bad(t, v);
  w.pad(4);
  const lengthAt = w.length;
  w.fixed("u", 0);
  w.pad(alignment(t.elem));
  const start = w.length;
  for (const e of v) writeValue(w, t.elem, e, depth + 1);
  const bytes = w.length - start;
  if (bytes > MAX_ARRAY_BYTES) bad(t, `<${bytes} bytes>`, `: longer than ${MAX_ARRAY_BYTES}`);
  w.patchU32(lengthAt, bytes);
}

function writeVariant(w: Writer, v: unknown, depth: number) {
  if (!(v instanceof Variant)) bad({ code: "v" }, v);
  const inner = singleType(parseSignature(v.signature));
  if (inner === null) bad({ code: "v" }, v.signature, ": a variant holds one complete type");
  writeString(w, { code: "g" }, v.signature);
  writeValue(w, inner, v.value, depth + 1);
}

/** Writes `v` as a value of type `t`; throws DBusEncodeError if it does not fit. */
export function writeValue(w: Writer, t: DType, v: unknown, depth = 0): void {
  if (depth > 64) bad(t, "<deep value>", ": nested more than 64 deep");
  const c = t.code;
  if (c === "y" || c === "n" || c === "q" || c === "i" || c === "u") writeInteger(w, c, v);
  else if (c === "x" || c === "t") writeBig(w, c, v);
  else if (c === "b") {
    if (typeof v !== "boolean") bad(t, v);
    w.fixed("u", v ? 1 : 0);
  } else if (c === "d") {
    if (typeof v !== "number") bad(t, v);
    w.fixed("d", v);
  } else if (c === "s" || c === "o" || c === "g") writeString(w, t, v);
  else if (c === "v") writeVariant(w, v, depth);
  else if (t.code === "a") writeArray(w, t, v, depth);
  else if (t.code === "(") writeFields(w, t, t.fields, v, depth);
  else if (t.code === "{") writeFields(w, t, [t.key, t.value], v, depth);
}

function writeFields(w: Writer, t: DType, fields: DType[], v: unknown, depth: number): void {
  if (!Array.isArray(v) || v.length !== fields.length) bad(t, v);
  w.pad(8);
  for (let i = 0; i < fields.length; i++) writeValue(w, fields[i] as DType, v[i], depth + 1);
}

/** The bytes of `values` written as the types of `signature`, from an 8-aligned offset. */
export function marshal(
  signature: string,
  values: readonly DBusValue[],
  little = true,
): Uint8Array {
  const types = parseSignature(signature);
  if (types.length !== values.length) {
    throw new DBusEncodeError(
      `signature ${JSON.stringify(signature)} has ${types.length} types but ${values.length} values were given`,
    );
  }
  const w = new Writer(little);
  for (let i = 0; i < types.length; i++) writeValue(w, types[i] as DType, values[i]);
  return w.result().slice();
}
