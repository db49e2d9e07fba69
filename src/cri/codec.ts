// Protocol buffers for the CRI messages, encoded and decoded by one small table-driven codec.
// The schemas are linked once from the protos' table (proto-table.ts); the calls then go through
// two generic functions. protobufjs generates a pair of functions per message type,
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

export { decodeMessage } from "./codec-decode.ts";
export { encodeMessage, MessageEncoder } from "./codec-encode.ts";

export type Scalar =
  | "double"
  | "int32"
  | "int64"
  | "uint32"
  | "uint64"
  | "bool"
  | "string"
  | "bytes";
export type Kind = Scalar | "enum" | "message";

export interface FieldSchema {
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

/** Wire types. */
/** 2^32: the high word of a 64-bit integer counts in these. */
export const TWO_32 = 4294967296;

export const WIRE_VARINT = 0;
export const WIRE_64 = 1;
export const WIRE_DELIMITED = 2;
export const WIRE_32 = 5;

export function wireType(kind: Kind): number {
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
