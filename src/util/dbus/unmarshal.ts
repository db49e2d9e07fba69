// Reading D-Bus values from bytes a peer sent, in either byte order. The reader trusts nothing:
// every length is checked against the bytes that are left before anything is read or made (so
// an array or string never claims more than the message holds), padding must be zero, booleans
// 0 or 1, strings valid UTF-8 without NUL, object paths and signatures valid, and containers
// (variants included) nest at most MAX_TOTAL_DEPTH deep. Each value read consumes at least one
// byte, so the work is bounded by the input's size times that depth. Every failure is a
// DBusDecodeError.
import { MAX_ARRAY_BYTES } from "./marshal.ts";
import {
  alignment,
  DBusDecodeError,
  type DBusValue,
  type DType,
  isObjectPath,
  MAX_TOTAL_DEPTH,
  parseSignatureFromPeer,
  singleType,
  Variant,
} from "./types.ts";

const utf8 = new TextDecoder("utf-8", { fatal: true });

export class Reader {
  private readonly view: DataView;
  /** Offset of the next byte to read. */
  pos = 0;

  constructor(
    readonly buf: Uint8Array,
    /** Whether the peer wrote little-endian ('l') rather than big-endian ('B'). */
    readonly little: boolean,
  ) {
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }

  get left(): number {
    return this.buf.length - this.pos;
  }

  private need(n: number, what: string): void {
    if (n > this.left) {
      throw new DBusDecodeError(`${what} at ${this.pos} needs ${n} bytes, ${this.left} left`);
    }
  }

  /** Skips the padding to the next multiple of `n`, which must be zero bytes. */
  align(n: number): void {
    const to = Math.ceil(this.pos / n) * n;
    this.need(to - this.pos, "padding");
    for (; this.pos < to; this.pos++) {
      if (this.buf[this.pos] !== 0) throw new DBusDecodeError(`non-zero padding at ${this.pos}`);
    }
  }

  u8(): number {
    this.need(1, "byte");
    return this.buf[this.pos++] ?? 0;
  }

  fixed(code: "n" | "q" | "i" | "u" | "d"): number {
    const size = code === "n" || code === "q" ? 2 : code === "d" ? 8 : 4;
    this.align(size);
    this.need(size, `value of type ${code}`);
    const at = this.pos;
    this.pos += size;
    const v = this.view;
    if (code === "n") return v.getInt16(at, this.little);
    if (code === "q") return v.getUint16(at, this.little);
    if (code === "i") return v.getInt32(at, this.little);
    if (code === "u") return v.getUint32(at, this.little);
    return v.getFloat64(at, this.little);
  }

  big(code: "x" | "t"): bigint {
    this.align(8);
    this.need(8, `value of type ${code}`);
    const at = this.pos;
    this.pos += 8;
    return code === "x"
      ? this.view.getBigInt64(at, this.little)
      : this.view.getBigUint64(at, this.little);
  }

  /** A string of `length` bytes followed by a NUL. */
  private text(length: number, what: string): string {
    this.need(length + 1, what);
    const bytes = this.buf.subarray(this.pos, this.pos + length);
    if (this.buf[this.pos + length] !== 0 || bytes.includes(0)) {
      throw new DBusDecodeError(`${what} at ${this.pos} is not ended by its one NUL`);
    }
    let s: string;
    try {
      s = utf8.decode(bytes);
    } catch {
      throw new DBusDecodeError(`${what} at ${this.pos} is not valid UTF-8`);
    }
    this.pos += length + 1;
    return s;
  }

  string(code: "s" | "o"): string {
    const at = this.pos;
    const s = this.text(this.fixed("u"), code === "s" ? "string" : "object path");
    if (code === "o" && !isObjectPath(s)) {
      throw new DBusDecodeError(`object path ${JSON.stringify(s)} at ${at} is not valid`);
    }
    return s;
  }

  signature(): string {
    const s = this.text(this.u8(), "signature");
    parseSignatureFromPeer(s);
    return s;
  }
}

function readArray(r: Reader, t: DType & { code: "a" }, depth: number): DBusValue[] {
  const length = r.fixed("u");
  if (length > MAX_ARRAY_BYTES) {
    throw new DBusDecodeError(`array of ${length} bytes is longer than ${MAX_ARRAY_BYTES}`);
  }
  r.align(alignment(t.elem));
  if (length > r.left) {
    throw new DBusDecodeError(`array of ${length} bytes at ${r.pos}: only ${r.left} left`);
  }
  const end = r.pos + length;
  const out: DBusValue[] = [];
  while (r.pos < end) out.push(readValue(r, t.elem, depth + 1));
  if (r.pos !== end) {
    throw new DBusDecodeError(`array ends at ${r.pos}, past its length's end ${end}`);
  }
  return out;
}

function readVariant(r: Reader, depth: number): Variant {
  const sig = r.signature();
  const t = singleType(parseSignatureFromPeer(sig));
  if (t === null) throw new DBusDecodeError(`variant signature ${JSON.stringify(sig)}`);
  return new Variant(sig, readValue(r, t, depth + 1));
}

/** Reads one value of type `t`; throws DBusDecodeError if the bytes do not hold one. */
export function readValue(r: Reader, t: DType, depth = 0): DBusValue {
  if (depth > MAX_TOTAL_DEPTH) {
    throw new DBusDecodeError(`value at ${r.pos} nests more than ${MAX_TOTAL_DEPTH} deep`);
  }
  switch (t.code) {
    case "y":
      return r.u8();
    case "n":
    case "q":
    case "i":
    case "u":
    case "d":
      return r.fixed(t.code);
    case "x":
    case "t":
      return r.big(t.code);
    case "b": {
      const b = r.fixed("u");
      if (b > 1) throw new DBusDecodeError(`boolean at ${r.pos - 4} is ${b}`);
      return b === 1;
    }
    case "s":
    case "o":
      return r.string(t.code);
    case "g":
      return r.signature();
    case "v":
      return readVariant(r, depth);
    case "a":
      return readArray(r, t, depth);
    default: {
      r.align(8);
      const fields = t.code === "(" ? t.fields : [t.key, t.value];
      return fields.map((f) => readValue(r, f, depth + 1));
    }
  }
}

/** The values of `signature` read from all of `bytes` (a message body); the whole body must be
 * used. */
export function unmarshal(signature: string, bytes: Uint8Array, little: boolean): DBusValue[] {
  const types = parseSignatureFromPeer(signature);
  const r = new Reader(bytes, little);
  const values = types.map((t) => readValue(r, t));
  if (r.left !== 0) throw new DBusDecodeError(`${r.left} bytes left after the body's values`);
  return values;
}
