// Decoding of the CRI messages (see codec.ts): the objects of protobufjs's toObject() with
// { longs: Number, enums: String, defaults: true }.

import {
  type FieldSchema,
  type Kind,
  type MessageSchema,
  TWO_32,
  WIRE_32,
  WIRE_64,
  WIRE_DELIMITED,
  WIRE_VARINT,
  wireType,
} from "./codec-schema.ts";

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
  /** The high 32 bits of the last varint read (readVarint returns the low 32). */
  hi: number;
}

function malformed(schema: MessageSchema, why: string): never {
  throw new Error(`malformed ${schema.name}: ${why}`);
}

/** Reads a varint: returns its low 32 bits and leaves the high 32 bits in `r.hi`. */
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
  r.hi = hi >>> 0;
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
  if (r.hi !== 0 || r.pos + n > r.buf.length) malformed(schema, "a length runs past the end");
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
      return readVarint(r, schema) !== 0 || r.hi !== 0;
    case "int32":
      return readVarint(r, schema) | 0;
    case "uint32":
      return readVarint(r, schema);
    case "int64": {
      const lo = readVarint(r, schema);
      return toNumber(lo, r.hi, true);
    }
    case "uint64": {
      const lo = readVarint(r, schema);
      return toNumber(lo, r.hi, false);
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
      const sub = { buf: r.buf, pos: r.pos, hi: 0 };
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

/** Sets a map entry as an own property, "__proto__" included (an assignment of that key would
 * change the object's prototype, or drop the entry). */
function setEntry(map: Record<string, unknown>, key: string, value: unknown): void {
  if (key === "__proto__") {
    Object.defineProperty(map, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  } else map[key] = value;
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
      if (r.pos !== entryEnd) malformed(schema, `an entry of ${field.name} runs past its length`);
      setEntry(out[field.name] as Record<string, unknown>, String(key), value);
    } else if (field.repeated) {
      const list = out[field.name] as unknown[];
      if (wire === WIRE_DELIMITED && wireType(field.kind) !== WIRE_DELIMITED) {
        const n = readLength(r, schema);
        const packedEnd = r.pos + n;
        while (r.pos < packedEnd) list.push(readBare(r, schema, field, field.kind));
        if (r.pos !== packedEnd) malformed(schema, `packed ${field.name} runs past its length`);
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
  return readFields({ buf, pos: 0, hi: 0 }, schema, buf.length);
}
