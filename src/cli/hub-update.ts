// `fleetlet hub update NODE --version V | --cancel` and `fleetlet hub update status [NODE]`: the
// release one node should run, and where taking it stands (docs/hub-releases.md, "Updating one
// node"). The hub offers it to the node's agent; the rollout of a release to many nodes is not
// this command.
import type { NodeUpdateView } from "../hub/updates/updates.ts";
import { type FlagSpecs, parseArgs } from "./args.ts";
import { UsageError } from "./errors.ts";
import { hubRequest, hubTarget } from "./hub-client.ts";
import type { CliIO } from "./io.ts";
import { age, parseOutputFormat, printObjects } from "./printers.ts";
import { alignTabs, TABLE } from "./tabwriter.ts";

const HUB_UPDATE_USAGE = `usage: fleetlet hub update NODE --version V --hub URL [--token T] [--ca-file F]
       fleetlet hub update NODE --cancel --hub URL [--token T]
       fleetlet hub update status [NODE] --hub URL [--token T] [-o json|yaml]
--version sets the release NODE should run (pushed with \`fleetlet hub release push\`, for the node's
arch); the hub offers it to the node's agent whenever it connects, until it runs it. --cancel
drops the wish: the device keeps what it runs. A node called "status" is named as any other
with --version or --cancel, and shown with \`hub update status status\`.
`;

const flags = {
  hub: { type: "string" },
  token: { type: "string" },
  "ca-file": { type: "string" },
  version: { type: "string" },
  cancel: { type: "boolean" },
  output: { type: "string", short: "o" },
  help: { type: "boolean", short: "h" },
} as const satisfies FlagSpecs;

const nodePath = (node: string) => `/api/v1/nodes/${encodeURIComponent(node)}/update`;

/** "downloading", "healthy (0.1.0, stale)", or "pending" before the agent reported. */
function phaseText(v: NodeUpdateView): string {
  if (v.phase !== undefined && v.staleVersion !== undefined)
    return `${v.phase} (${v.staleVersion}, stale)`;
  return v.phase ?? (v.wanted === undefined ? "-" : "pending");
}

function progressText(v: NodeUpdateView): string {
  if (v.staleVersion !== undefined || v.bytes === undefined || !v.total) return "-";
  return `${Math.floor((100 * v.bytes) / v.total)}%`;
}

/** The table: NODE ARCH RUNNING WANTED PHASE PROGRESS REASON AGE. */
function printUpdateTable(items: NodeUpdateView[], now: number): string {
  const rows = items.map((v) =>
    [
      v.node,
      v.arch ?? "<unknown>",
      v.running ?? "<unknown>",
      v.wanted ?? "-",
      phaseText(v),
      progressText(v),
      v.problem ?? v.reason ?? "-",
      age(v.setAt ?? v.reportedAt, now),
    ].join("\t"),
  );
  const header = ["NODE", "ARCH", "RUNNING", "WANTED", "PHASE", "PROGRESS", "REASON", "AGE"];
  return alignTabs([header.join("\t"), ...rows].map((r) => `${r}\n`).join(""), TABLE);
}

async function status(argv: string[], io: CliIO): Promise<number> {
  const { flags: f, positionals } = parseArgs(argv, flags);
  const [node, ...extra] = positionals;
  if (extra.length > 0)
    throw new UsageError(`hub update status takes at most one node\n${HUB_UPDATE_USAGE}`);
  const format = parseOutputFormat(f.output);
  const target = hubTarget(f, io);
  const items =
    node === undefined
      ? (await hubRequest<{ items: NodeUpdateView[] }>(target, "GET", "/api/v1/updates")).items
      : [await hubRequest<NodeUpdateView>(target, "GET", nodePath(node))];
  if (format === "json" || format === "yaml") io.stdout(printObjects(items, format));
  else if (items.length === 0) io.stderr("No node updates found\n");
  else io.stdout(printUpdateTable(items, io.now()));
  return 0;
}

async function setOrCancel(argv: string[], io: CliIO): Promise<number> {
  const { flags: f, positionals } = parseArgs(argv, flags);
  const [node, ...extra] = positionals;
  if (node === undefined || extra.length > 0)
    throw new UsageError(`hub update takes one node\n${HUB_UPDATE_USAGE}`);
  if ((f.version === undefined) === (f.cancel !== true))
    throw new UsageError(`hub update takes --version V or --cancel\n${HUB_UPDATE_USAGE}`);
  const target = hubTarget(f, io);
  if (f.version === undefined) {
    const r = await hubRequest<{ canceled: boolean }>(target, "DELETE", nodePath(node));
    io.stdout(r.canceled ? `node/${node} update canceled\n` : `node/${node} had no update\n`);
    return 0;
  }
  const v = await hubRequest<NodeUpdateView>(target, "PUT", nodePath(node), {
    version: f.version,
  });
  const note = v.problem === undefined ? "" : ` (${v.problem})`;
  io.stdout(`node/${node} update to ${f.version} set${note}\n`);
  return 0;
}

/** `fleetlet hub update ...`. */
export function hubUpdateCommand(argv: string[], io: CliIO): Promise<number> {
  const [first, ...rest] = argv;
  // "status" is the node's name when a change is asked for: a node may be called "status".
  const change = argv.some((a) => /^--(version|cancel)(=|$)/.test(a));
  if (first === "status" && !change) return status(rest, io);
  if (first === undefined || first === "--help" || first === "-h") {
    io.stdout(HUB_UPDATE_USAGE);
    return Promise.resolve(0);
  }
  return setOrCancel(argv, io);
}
