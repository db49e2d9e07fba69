// Encoding of the CRI messages (see codec.ts): the shapes protobufjs's fromObject() accepts.

import {
  type FieldSchema,
  type Kind,
  type MessageSchema,
  TWO_32,
  WIRE_DELIMITED,
  wireType,
} from "./codec-schema.ts";

/** A growing byte buffer with a write position. */
class Writer {
  buf: Uint8Array;
  pos = 0;

  constructor(buf: Uint8Array) {
    this.buf = buf;
  }

  private reserve(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
  }

  byte(b: number): void {
    this.reserve(1);
    this.buf[this.pos++] = b;
  }

  /** An unsigned varint below 2^53. */
  varint(v: number): void {
    this.reserve(10);
    while (v >= 0x80) {
      this.buf[this.pos++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buf[this.pos++] = v;
  }

  /** A varint of the 64-bit two's complement of an integer (negative numbers take 10 bytes). */
  signed64(v: number): void {
    if (v >= 0) {
      this.varint(v);
      return;
    }
    let lo = (-v % TWO_32) >>> 0;
    let hi = Math.floor(-v / TWO_32) >>> 0;
    lo = (~lo + 1) >>> 0;
    hi = ~hi >>> 0;
    if (lo === 0) hi = (hi + 1) >>> 0;
    this.reserve(10);
    while (hi !== 0 || lo >= 0x80) {
      this.buf[this.pos++] = (lo & 0x7f) | 0x80;
      lo = ((lo >>> 7) | (hi << 25)) >>> 0;
      hi >>>= 7;
    }
    this.buf[this.pos++] = lo;
  }

  bytes(b: Uint8Array): void {
    this.varint(b.length);
    this.reserve(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }

  string(s: string): void {
    // At most 3 bytes per UTF-16 unit, after one length byte (more are made room for after).
    this.reserve(5 + s.length * 3);
    const start = this.pos + 1;
    const buf = this.buf;
    let at = start;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) {
        at = start + encoder.encodeInto(s, buf.subarray(start)).written;
        break;
      }
      buf[at++] = c;
    }
    this.finishDelimited(start, at - start);
  }

  double(v: number): void {
    this.reserve(8);
    new DataView(this.buf.buffer, this.buf.byteOffset + this.pos, 8).setFloat64(0, v, true);
    this.pos += 8;
  }

  /** Starts a length-delimited field whose content follows; returns where the content starts. */
  begin(): number {
    this.byte(0);
    return this.pos;
  }

  /** Ends the field begun at `start`: writes its length in front of its content. */
  end(start: number): void {
    this.reserve(4);
    this.finishDelimited(start, this.pos - start);
  }

  /** Writes the length of the `length` bytes at `start` into the byte before them, moving them
   * right when the length takes more than one byte; the caller made room for up to 4 more. */
  private finishDelimited(start: number, length: number): void {
    let size = 1;
    for (let v = length; v >= 0x80; v = Math.floor(v / 0x80)) size++;
    if (size > 1) this.buf.copyWithin(start + size - 1, start, start + length);
    let at = start - 1;
    let v = length;
    while (v >= 0x80) {
      this.buf[at++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buf[at++] = v;
    this.pos = at + length;
  }

  /** A copy of what was written. */
  finish(): Buffer {
    return Buffer.from(this.buf.subarray(0, this.pos));
  }
}

const encoder = new TextEncoder();

function typeError(schema: MessageSchema, field: FieldSchema, expected: string): never {
  throw new TypeError(`.${schema.name}.${field.name}: ${expected} expected`);
}

/**
 * Encodes messages into one reusable buffer, copied out for each message: a client keeps one, so
 * that a call's request costs one allocation of its own size. Encodes on one encoder never
 * interleave (encoding is synchronous).
 */
export class MessageEncoder {
  /** The buffer messages are written into before being copied out. */
  private scratch: Uint8Array = new Uint8Array(16 * 1024);

  /** Encodes `obj` as a message of `schema`. */
  encode(schema: MessageSchema, obj: unknown): Buffer {
    const w = new Writer(this.scratch);
    writeFields(w, schema, obj as Record<string, unknown>);
    // Keep a buffer that grew for a large message only while it stays reasonably small.
    if (w.buf.length <= 1 << 20) this.scratch = w.buf;
    return w.finish();
  }
}

/** Encodes `obj` as a message of `schema` (on a buffer of its own: for one-off messages). */
export function encodeMessage(schema: MessageSchema, obj: unknown): Buffer {
  const w = new Writer(new Uint8Array(256));
  writeFields(w, schema, obj as Record<string, unknown>);
  return w.finish();
}

function writeFields(w: Writer, schema: MessageSchema, obj: Record<string, unknown>): void {
  for (const field of schema.fields) {
    const value = obj[field.name];
    if (value === undefined || value === null) continue;
    if (field.mapKey !== undefined) {
      if (typeof value !== "object") typeError(schema, field, "object");
      const map = value as Record<string, unknown>;
      for (const k in map) {
        if (!Object.hasOwn(map, k)) continue;
        const v = map[k];
        w.varint((field.no << 3) | WIRE_DELIMITED);
        const start = w.begin();
        writeValue(w, schema, field, field.mapKey, 1, k);
        writeValue(w, schema, field, field.kind, 2, v);
        w.end(start);
      }
    } else if (field.repeated) {
      if (!Array.isArray(value)) typeError(schema, field, "array");
      if (value.length === 0) continue;
      if (wireType(field.kind) === WIRE_DELIMITED) {
        for (const v of value) writeValue(w, schema, field, field.kind, field.no, v);
      } else {
        // Repeated numbers are packed, as proto3 says.
        w.varint((field.no << 3) | WIRE_DELIMITED);
        const start = w.begin();
        for (const v of value) writeBare(w, schema, field, field.kind, v);
        w.end(start);
      }
    } else {
      writeValue(w, schema, field, field.kind, field.no, value);
    }
  }
}

function writeValue(
  w: Writer,
  schema: MessageSchema,
  field: FieldSchema,
  kind: Kind,
  no: number,
  v: unknown,
): void {
  if (kind === "enum" && enumNumber(field, v) === undefined) return;
  w.varint((no << 3) | wireType(kind));
  writeBare(w, schema, field, kind, v);
}

function enumNumber(field: FieldSchema, v: unknown): number | undefined {
  if (typeof v === "number") return v;
  return field.enumNumbers?.get(String(v));
}

/** One value without its tag. */
function writeBare(w: Writer, schema: MessageSchema, field: FieldSchema, kind: Kind, v: unknown) {
  switch (kind) {
    case "string":
      return w.string(String(v));
    case "bool":
      return w.byte(v ? 1 : 0);
    case "int32":
      return w.signed64(Number(v) | 0);
    case "uint32":
      return w.varint(Number(v) >>> 0);
    case "int64":
    case "uint64":
      return w.signed64(Math.trunc(Number(v)));
    case "double":
      return w.double(Number(v));
    case "enum":
      return w.signed64(enumNumber(field, v) as number);
    case "bytes":
      return w.bytes(typeof v === "string" ? Buffer.from(v, "base64") : (v as Uint8Array));
    case "message": {
      if (typeof v !== "object") typeError(schema, field, "object");
      const start = w.begin();
      writeFields(w, field.message as MessageSchema, v as Record<string, unknown>);
      return w.end(start);
    }
  }
}
