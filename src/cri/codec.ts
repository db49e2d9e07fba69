// Protocol buffers for the CRI messages, encoded and decoded by one small table-driven codec.
// The schema tables are built once from the parsed proto (protobufjs reflection); the calls then
// go through two generic functions. protobufjs generates a pair of functions per message type,
// each run a few dozen times in a burst of starting pods and so mostly cold (not yet compiled by
// the JIT): that cost ~1.4 ms of CPU per started pod, against ~0.2 ms here.
//
// The decoded objects are those of protobufjs's toObject() with { longs: Number, enums: String,
// defaults: true } (what @grpc/proto-loader gives): every field present, absent ones at their
// default (0, "", false, the enum's first name, [] and {} for repeated and map fields, null for
// a message, an empty Buffer for bytes), 64-bit integers as numbers, enums as names (an unknown
// number stays a number). The encoder takes the same shapes, as protobufjs's fromObject() does:
// fields that are undefined or null are left out, enums may be names or numbers, numbers and
// strings are coerced to the field's type. test/unit/cri/codec.test.ts checks both directions
// against protobufjs on every message type of the proto.

import type { Enum, Field, MapField, Root, Type } from "protobufjs";

type Scalar = "double" | "int32" | "int64" | "uint32" | "uint64" | "bool" | "string" | "bytes";
type Kind = Scalar | "enum" | "message";

interface FieldSchema {
  no: number;
  name: string;
  kind: Kind;
  repeated: boolean;
  /** For a map field, the key's kind (its value is described by kind/message/enumValues). */
  mapKey?: Scalar;
  message?: MessageSchema;
  /** An enum's names by number, and numbers by name. */
  enumNames?: Map<number, string>;
  enumNumbers?: Map<string, number>;
}

export interface MessageSchema {
  name: string;
  fields: FieldSchema[];
  /** Fields by field number. */
  byNo: Map<number, FieldSchema>;
}

const SCALARS: ReadonlySet<string> = new Set([
  "double",
  "int32",
  "int64",
  "uint32",
  "uint64",
  "bool",
  "string",
  "bytes",
]);

function scalarKind(type: string, where: string): Scalar {
  if (!SCALARS.has(type)) throw new Error(`codec: field type ${type} of ${where} is not supported`);
  return type as Scalar;
}

/** Schemas of every message type of `root` (resolved), by full name without the leading dot. */
export function buildSchemas(root: Root): Map<string, MessageSchema> {
  root.resolveAll();
  const schemas = new Map<string, MessageSchema>();
  const schemaOf = (type: Type): MessageSchema => {
    const name = type.fullName.replace(/^\./, "");
    const known = schemas.get(name);
    if (known) return known;
    const schema: MessageSchema = { name, fields: [], byNo: new Map() };
    schemas.set(name, schema);
    for (const f of type.fieldsArray) {
      const field = fieldSchema(f, `${name}.${f.name}`, schemaOf);
      schema.fields.push(field);
      schema.byNo.set(field.no, field);
    }
    return schema;
  };
  const visit = (ns: { nestedArray?: unknown[] }) => {
    for (const nested of ns.nestedArray ?? []) {
      if ((nested as Type).fieldsArray !== undefined) schemaOf(nested as Type);
      visit(nested as { nestedArray?: unknown[] });
    }
  };
  visit(root);
  return schemas;
}

function fieldSchema(f: Field, where: string, schemaOf: (t: Type) => MessageSchema): FieldSchema {
  const field: FieldSchema = { no: f.id, name: f.name, kind: "string", repeated: false };
  if (f.map) field.mapKey = scalarKind((f as unknown as MapField).keyType, where);
  else field.repeated = f.repeated;
  const resolved = f.resolvedType;
  if (resolved === null) {
    field.kind = scalarKind(f.type, where);
  } else if ((resolved as Type).fieldsArray !== undefined) {
    field.kind = "message";
    field.message = schemaOf(resolved as Type);
  } else {
    const values = (resolved as Enum).values;
    field.kind = "enum";
    field.enumNumbers = new Map(Object.entries(values));
    field.enumNames = new Map(Object.entries(values).map(([k, v]) => [v, k]));
  }
  return field;
}

// ---------------------------------------------------------------------------------------------
// Encoding

const TWO_32 = 4294967296;

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

const WIRE_VARINT = 0;
const WIRE_64 = 1;
const WIRE_DELIMITED = 2;
const WIRE_32 = 5;

function wireType(kind: Kind): number {
  switch (kind) {
    case "double":
      return WIRE_64;
    case "string":
    case "bytes":
    case "message":
      return WIRE_DELIMITED;
    default:
      return WIRE_VARINT;
  }
}

function typeError(schema: MessageSchema, field: FieldSchema, expected: string): never {
  throw new TypeError(`.${schema.name}.${field.name}: ${expected} expected`);
}

/** Encodes `obj` as a message of `schema`. */
export function encodeMessage(schema: MessageSchema, obj: unknown): Buffer {
  const w = new Writer(scratch);
  writeFields(w, schema, obj as Record<string, unknown>);
  // Keep a buffer that grew for a large message only while it stays reasonably small.
  if (w.buf.length <= 1 << 20) scratch = w.buf;
  return w.finish();
}

/** The buffer messages are written into before being copied out; encodes never interleave. */
let scratch: Uint8Array = new Uint8Array(16 * 1024);

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

// ---------------------------------------------------------------------------------------------
// Decoding

function defaultOf(field: FieldSchema): unknown {
  switch (field.kind) {
    case "string":
      return "";
    case "bool":
      return false;
    case "enum":
      return field.enumNames?.get(0) ?? 0;
    case "bytes":
      return Buffer.alloc(0);
    case "message":
      return null;
    default:
      return 0;
  }
}

/** Reading position over one message's bytes. */
interface Reader {
  buf: Buffer;
  pos: number;
}

function malformed(schema: MessageSchema, why: string): never {
  throw new Error(`malformed ${schema.name}: ${why}`);
}

/** Reads a varint: returns its low 32 bits and leaves the high 32 bits in `hiOut`. */
let hiOut = 0;
function readVarint(r: Reader, schema: MessageSchema): number {
  const buf = r.buf;
  let lo = 0;
  let hi = 0;
  let shift = 0;
  let b: number;
  do {
    if (r.pos >= buf.length) malformed(schema, "a varint runs past the end");
    b = buf[r.pos++] as number;
    if (shift < 28) lo |= (b & 0x7f) << shift;
    else if (shift === 28) {
      lo |= (b & 0x0f) << 28;
      hi = (b & 0x7f) >>> 4;
    } else if (shift < 64) hi |= (b & 0x7f) << (shift - 32);
    else malformed(schema, "a varint is longer than 10 bytes");
    shift += 7;
  } while (b >= 0x80);
  hiOut = hi >>> 0;
  return lo >>> 0;
}

function toNumber(lo: number, hi: number, signed: boolean): number {
  if (signed && hi >>> 31) {
    let l = (~lo + 1) >>> 0;
    let h = ~hi >>> 0;
    if (!l) h = (h + 1) >>> 0;
    l = l >>> 0;
    return -(l + h * TWO_32);
  }
  return lo + hi * TWO_32;
}

function readLength(r: Reader, schema: MessageSchema): number {
  const n = readVarint(r, schema);
  if (hiOut !== 0 || r.pos + n > r.buf.length) malformed(schema, "a length runs past the end");
  return n;
}

function readBare(r: Reader, schema: MessageSchema, field: FieldSchema, kind: Kind): unknown {
  switch (kind) {
    case "string": {
      const n = readLength(r, schema);
      const s = r.buf.toString("utf8", r.pos, r.pos + n);
      r.pos += n;
      return s;
    }
    case "bytes": {
      const n = readLength(r, schema);
      const b = r.buf.subarray(r.pos, r.pos + n);
      r.pos += n;
      return b;
    }
    case "bool":
      return readVarint(r, schema) !== 0 || hiOut !== 0;
    case "int32":
      return readVarint(r, schema) | 0;
    case "uint32":
      return readVarint(r, schema);
    case "int64": {
      const lo = readVarint(r, schema);
      return toNumber(lo, hiOut, true);
    }
    case "uint64": {
      const lo = readVarint(r, schema);
      return toNumber(lo, hiOut, false);
    }
    case "enum": {
      const v = readVarint(r, schema) | 0;
      return field.enumNames?.get(v) ?? v;
    }
    case "double": {
      if (r.pos + 8 > r.buf.length) malformed(schema, "a double runs past the end");
      const v = r.buf.readDoubleLE(r.pos);
      r.pos += 8;
      return v;
    }
    case "message": {
      const n = readLength(r, schema);
      const sub = { buf: r.buf, pos: r.pos };
      const end = r.pos + n;
      r.pos = end;
      return readFields(sub, field.message as MessageSchema, end);
    }
  }
}

function skip(r: Reader, schema: MessageSchema, wire: number): void {
  switch (wire) {
    case WIRE_VARINT:
      readVarint(r, schema);
      return;
    case WIRE_64:
      r.pos += 8;
      break;
    case WIRE_DELIMITED: {
      const n = readLength(r, schema);
      r.pos += n;
      return;
    }
    case WIRE_32:
      r.pos += 4;
      break;
    default:
      malformed(schema, `wire type ${wire} is not supported`);
  }
  if (r.pos > r.buf.length) malformed(schema, "a field runs past the end");
}

/** The object of a `schema` message in r.buf from r.pos to `end`. */
function readFields(r: Reader, schema: MessageSchema, end: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  // protobufjs's order of keys: repeated fields, then maps, then the others.
  for (const f of schema.fields) if (f.repeated) out[f.name] = [];
  for (const f of schema.fields) if (f.mapKey !== undefined) out[f.name] = {};
  for (const f of schema.fields) {
    if (!f.repeated && f.mapKey === undefined) out[f.name] = defaultOf(f);
  }
  const whole = r.buf;
  if (end < whole.length) r.buf = whole.subarray(0, end);
  while (r.pos < end) {
    const tag = readVarint(r, schema);
    const no = tag >>> 3;
    const wire = tag & 7;
    const field = schema.byNo.get(no);
    if (field === undefined) {
      skip(r, schema, wire);
      continue;
    }
    if (field.mapKey !== undefined) {
      if (wire !== WIRE_DELIMITED) malformed(schema, `map field ${field.name} is not delimited`);
      const n = readLength(r, schema);
      const entryEnd = r.pos + n;
      let key: unknown = defaultOf({ ...field, kind: field.mapKey });
      let value: unknown = defaultOf(field);
      while (r.pos < entryEnd) {
        const t = readVarint(r, schema);
        if (t >>> 3 === 1) key = readBare(r, schema, field, field.mapKey);
        else if (t >>> 3 === 2) value = readBare(r, schema, field, field.kind);
        else skip(r, schema, t & 7);
      }
      (out[field.name] as Record<string, unknown>)[String(key)] = value;
    } else if (field.repeated) {
      const list = out[field.name] as unknown[];
      if (wire === WIRE_DELIMITED && wireType(field.kind) !== WIRE_DELIMITED) {
        const n = readLength(r, schema);
        const packedEnd = r.pos + n;
        while (r.pos < packedEnd) list.push(readBare(r, schema, field, field.kind));
      } else {
        list.push(readBare(r, schema, field, field.kind));
      }
    } else {
      out[field.name] = readBare(r, schema, field, field.kind);
    }
  }
  r.buf = whole;
  if (r.pos !== end) malformed(schema, "a field runs past the end of the message");
  return out;
}

/** Decodes a message of `schema`. */
export function decodeMessage(schema: MessageSchema, buf: Buffer): Record<string, unknown> {
  return readFields({ buf, pos: 0 }, schema, buf.length);
}
