// The CRI proto, embedded in the program at build time (Bun text import): nothing is read from
// the source tree at run time, so the compiled binary carries it.

import { fromJSON, type PackageDefinition } from "@grpc/proto-loader";
import { parse } from "protobufjs";
import criProto from "../../proto/cri.proto" with { type: "text" };

export const CRI_PACKAGE = "runtime.v1";

/** The text of proto/cri.proto as embedded in this build. */
export function criProtoText(): string {
  return criProto;
}

/**
 * Parses the embedded proto into a grpc-js package definition: camelCase fields, 64-bit integers
 * as numbers, enums as names, every field present in decoded messages. Each call parses afresh;
 * the caller keeps the result as long as it needs it.
 */
export function loadCriPackageDefinition(): PackageDefinition {
  return loadCriProto().definition;
}

const OBJECT_OPTIONS = { longs: Number, enums: String, defaults: true, oneofs: true };

/** The package definition, a decoder of one message type ("runtime.v1.Container") that gives
 * the same objects as the definition's response decoders, and a type's map fields (field number →
 * property name in decoded objects). */
export function loadCriProto(): {
  definition: PackageDefinition;
  decoder(type: string): (buf: Buffer) => unknown;
  mapFields(type: string): ReadonlyMap<number, string>;
} {
  const { root } = parse(criProto, { keepCase: false });
  return {
    definition: fromJSON(root.toJSON(), OBJECT_OPTIONS),
    decoder(type) {
      const t = root.lookupType(type);
      return (buf) => t.toObject(t.decode(buf), OBJECT_OPTIONS);
    },
    mapFields(type) {
      const fields = root.lookupType(type).fieldsArray.filter((f) => f.map);
      return new Map(fields.map((f) => [f.id, f.name]));
    },
  };
}
