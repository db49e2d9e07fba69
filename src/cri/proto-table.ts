// The messages, enums and RPCs of fleetlet's protos as a plain table (proto-macro.ts builds it
// from the .proto files when the program is built), linked at start into the codec's schemas:
// no .proto parser runs on a device.

import type { FieldSchema, Kind, MessageSchema, Scalar } from "./codec.ts";

export interface TableField {
  no: number;
  name: string;
  kind: Kind;
  repeated: boolean;
  /** For a map field, the key's kind (its value is described by kind and type). */
  mapKey?: Scalar;
  /** The full name of a message or enum field's type. */
  type?: string;
}

export interface ProtoTable {
  /** Fields of each message type, by full name ("runtime.v1.Container"). */
  messages: Record<string, TableField[]>;
  /** Values of each enum type, by full name. */
  enums: Record<string, Record<string, number>>;
  /** Each RPC's request and response types, by "package.Service/Method". */
  methods: Record<string, { request: string; response: string }>;
}

/** The codec's schemas of every message of `table`, by full name. */
export function linkSchemas(table: ProtoTable): Map<string, MessageSchema> {
  const schemas = new Map<string, MessageSchema>();
  for (const name of Object.keys(table.messages)) {
    schemas.set(name, { name, fields: [], byNo: new Map() });
  }
  for (const [name, fields] of Object.entries(table.messages)) {
    const schema = schemas.get(name) as MessageSchema;
    for (const f of fields) {
      const field: FieldSchema = { no: f.no, name: f.name, kind: f.kind, repeated: f.repeated };
      if (f.mapKey !== undefined) field.mapKey = f.mapKey;
      if (f.kind === "message") field.message = schemas.get(f.type ?? "");
      if (f.kind === "enum") {
        const values = table.enums[f.type ?? ""] ?? {};
        field.enumNumbers = new Map(Object.entries(values));
        field.enumNames = new Map(Object.entries(values).map(([k, v]) => [v, k]));
      }
      schema.fields.push(field);
      schema.byNo.set(field.no, field);
    }
  }
  return schemas;
}
