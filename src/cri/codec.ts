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
export type { FieldSchema, Kind, MessageSchema, Scalar } from "./codec-schema.ts";
