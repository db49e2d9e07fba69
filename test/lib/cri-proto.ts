// The embedded CRI proto as a grpc-js package definition (camelCase fields, 64-bit integers as
// numbers, enums as names, every field present in decoded messages), for the grpc-js servers
// and clients that tests and benchmarks check our own stack against. Each call parses afresh.
import { fromJSON, type PackageDefinition } from "@grpc/proto-loader";
import { parse } from "protobufjs";
import { criProtoText } from "../../src/cri/index.ts";

export function loadCriPackageDefinition(): PackageDefinition {
  const { root } = parse(criProtoText(), { keepCase: false });
  return fromJSON(root.toJSON(), { longs: Number, enums: String, defaults: true, oneofs: true });
}
