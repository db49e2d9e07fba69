// The schemas of the CRI messages as the codec reads them (linked from the protos' table by
// proto-table.ts), and protobuf's wire types (see codec.ts).

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

/** 2^32: the high word of a 64-bit integer counts in these. */
export const TWO_32 = 4294967296;

/** Wire types. */
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
