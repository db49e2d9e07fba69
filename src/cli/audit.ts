// `fleetlet hub audit`: the hub's audit log of execs, attaches and port-forwards into devices,
// newest last.
import type { AuditRecord } from "../hub/audit.ts";
import { type FlagSpecs, parseArgs } from "./args.ts";
import { UsageError } from "./errors.ts";
import { hubRequest, hubTarget } from "./hub-client.ts";
import type { CliIO } from "./io.ts";
import { parseOutputFormat, printObjects } from "./printers.ts";
import { alignTabs, TABLE } from "./tabwriter.ts";

const AUDIT_USAGE = `usage: fleetlet hub audit --hub URL [--token T] [--node NAME] [--limit 100] [-o json|yaml]
  Every exec, attach and port-forward into a device: who, from where, which pod and command or ports,
  when, for how long, and how it ended; every release push and delete, every node update set
  or canceled, and every agent rollout created, changed, paused, resumed, undone or deleted.
`;

const flags = {
  hub: { type: "string" },
  token: { type: "string" },
  "ca-file": { type: "string" },
  node: { type: "string" },
  limit: { type: "int" },
  output: { type: "string", short: "o" },
  help: { type: "boolean", short: "h" },
} as const satisfies FlagSpecs;

function what(r: AuditRecord): string {
  if (r.kind === "agentrollout")
    return `${r.action ?? "?"} agentrollout/${r.rollout ?? "?"} ${r.release ?? ""}`.trim();
  if (r.kind === "update") return `${r.action ?? "?"} ${r.release ?? ""}`.trim();
  if (r.kind === "release") return `${r.action ?? "?"} ${r.release ?? "?"}`;
  if (r.kind === "exec") return `${r.tty ? "-t " : ""}${(r.command ?? []).join(" ")}`;
  if (r.kind === "attach") return r.tty ? "-t (attach)" : "(attach)";
  return `ports ${(r.ports ?? []).join(",") || "(any)"}; ${r.connections ?? 0} connections`;
}

function duration(r: AuditRecord): string {
  if (r.ended === undefined) return "(open)";
  const s = Math.round((Date.parse(r.ended) - Date.parse(r.started)) / 1000);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${s % 60}s`;
}

/** The audit table: ID KIND NODE POD CONTAINER WHAT STARTED DURATION OUTCOME CLIENT. */
function printAuditTable(items: AuditRecord[]): string {
  const header = [
    "ID",
    "KIND",
    "NODE",
    "POD",
    "CONTAINER",
    "WHAT",
    "STARTED",
    "DURATION",
    "OUTCOME",
    "CLIENT",
  ];
  const rows = items.map((r) => [
    String(r.id),
    r.kind,
    r.node || "-",
    r.pod ? `${r.namespace}/${r.pod}` : "-",
    r.container ?? "-",
    what(r),
    r.started,
    duration(r),
    r.outcome ?? "-",
    `${r.user}@${r.client}`,
  ]);
  return alignTabs([header, ...rows].map((r) => `${r.join("\t")}\n`).join(""), TABLE);
}

export async function auditCommand(argv: string[], io: CliIO): Promise<number> {
  const { flags: f, positionals } = parseArgs(argv, flags);
  if (f.help) {
    io.stdout(AUDIT_USAGE);
    return 0;
  }
  if (positionals.length > 0)
    throw new UsageError(`unexpected argument ${positionals[0]}\n${AUDIT_USAGE}`);
  const format = parseOutputFormat(f.output);
  const q = new URLSearchParams();
  if (f.node !== undefined) q.set("node", f.node);
  if (f.limit !== undefined) q.set("limit", String(f.limit));
  const list = await hubRequest<{ items: AuditRecord[] }>(
    hubTarget(f, io),
    "GET",
    `/api/v1/audit${q.size > 0 ? `?${q}` : ""}`,
  );
  if (format === "json" || format === "yaml") io.stdout(printObjects(list.items, format));
  else if (list.items.length === 0) io.stderr("No audit records\n");
  else io.stdout(printAuditTable(list.items));
  return 0;
}
