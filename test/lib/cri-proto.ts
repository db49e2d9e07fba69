// The CRI proto for tests: its text (read from proto/cri.proto), and as a grpc-js package
// definition (camelCase fields, 64-bit integers as numbers, enums as names, every field present in
// decoded messages), for the grpc-js servers and clients that tests and benchmarks check our own
// stack against. Each call parses afresh.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fromJSON, type PackageDefinition } from "@grpc/proto-loader";
import { parse } from "protobufjs";
import { repoRoot } from "./testbed.ts";

/** The text of proto/cri.proto. */
export function criProtoText(): string {
  return readFileSync(join(repoRoot, "proto/cri.proto"), "utf8");
}

export function loadCriPackageDefinition(): PackageDefinition {
  const { root } = parse(criProtoText(), { keepCase: false });
  return fromJSON(root.toJSON(), { longs: Number, enums: String, defaults: true, oneofs: true });
}
