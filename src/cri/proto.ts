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
  const { root } = parse(criProto, { keepCase: false });
  return fromJSON(root.toJSON(), { longs: Number, enums: String, defaults: true, oneofs: true });
}
