// Build time only: reads fleetlet's .proto files with protobufjs and returns them as a plain table
// (proto-table.ts). src/cri/proto.ts imports protoTable() as a Bun macro (`with { type: "macro" }`),
// so the table is computed when the program is built (or loaded by `bun test`) and inlined as a
// literal: the compiled binary carries neither the .proto text nor a parser for it.

import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Enum, Field, MapField, Root, Type } from "protobufjs";
import { parse } from "protobufjs";
import type { Kind, Scalar } from "./codec.ts";
import type { ProtoTable, TableField } from "./proto-table.ts";

const PROTO_DIR = join(import.meta.dir, "../../proto");
const PROTO_FILES = [
  "cri.proto",
  "containerd-events.proto",
  "deviceplugin.proto",
  "containerd-types.proto",
  "containerd-content.proto",
  "containerd-leases.proto",
  "containerd-snapshots.proto",
  "containerd-diff.proto",
  "containerd-images.proto",
];

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

const fullName = (t: { fullName: string }) => t.fullName.replace(/^\./, "");

function tableField(f: Field, where: string): TableField {
  const out: TableField = { no: f.id, name: f.name, kind: "string", repeated: false };
  if (f.map) out.mapKey = scalarKind((f as unknown as MapField).keyType, where);
  else out.repeated = f.repeated;
  const resolved = f.resolvedType;
  if (resolved === null) out.kind = scalarKind(f.type, where);
  else {
    out.kind = ((resolved as Type).fieldsArray !== undefined ? "message" : "enum") as Kind;
    out.type = fullName(resolved);
  }
  return out;
}

/** The table of a parsed, resolved protobufjs root. */
export function tableOf(root: Root): ProtoTable {
  root.resolveAll();
  const table: ProtoTable = { messages: {}, enums: {}, methods: {} };
  const visit = (ns: { nestedArray?: unknown[] }) => {
    for (const nested of ns.nestedArray ?? []) {
      const n = nested as Type & Enum & { methods?: Record<string, unknown> };
      if (n.fieldsArray !== undefined) {
        const name = fullName(n);
        table.messages[name] = n.fieldsArray.map((f) => tableField(f, `${name}.${f.name}`));
      } else if (n.values !== undefined && n.fieldsArray === undefined && !n.methods) {
        table.enums[fullName(n)] = { ...n.values };
      } else if (n.methods !== undefined) {
        for (const [method, m] of Object.entries(root.lookupService(fullName(n)).methods)) {
          m.resolve();
          table.methods[`${fullName(n)}/${method}`] = {
            request: fullName(m.resolvedRequestType as Type),
            response: fullName(m.resolvedResponseType as Type),
          };
        }
      }
      visit(nested as { nestedArray?: unknown[] });
    }
  };
  visit(root);
  return table;
}

/** The .proto files' text, as read now. */
function protoTexts(): string[] {
  return PROTO_FILES.map((f) => readFileSync(join(PROTO_DIR, f), "utf8"));
}

/** The table of fleetlet's .proto files (used as a macro). */
export function protoTable(): ProtoTable {
  const [first, ...rest] = protoTexts();
  const { root } = parse(first as string, { keepCase: false });
  for (const text of rest) parse(text, root, { keepCase: false });
  return tableOf(root);
}
