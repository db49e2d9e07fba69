// `fleetlet describe node NAME --hub URL`: a node as the hub knows it, with its device's health
// (GET /api/v1/nodes/NAME and .../health; docs/protocol.md, "Device health").
import type { Node } from "../api/node.ts";
import type { NodeHealthView } from "../hub/health.ts";
import type { DeviceHealth } from "../protocol/health.ts";
import { type FlagSpecs, parseArgs } from "./args.ts";
import { UsageError } from "./errors.ts";
import { hubRequest, hubTarget } from "./hub-client.ts";
import type { CliIO } from "./io.ts";
import { alignTabs, TABLE } from "./tabwriter.ts";

const USAGE = "usage: fleetlet describe node NAME --hub URL [--token T] [--ca-file F]\n";

const flags = {
  hub: { type: "string" },
  token: { type: "string" },
  "ca-file": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const satisfies FlagSpecs;

function size(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = bytes;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(i === 0 ? 0 : 1)}${units[i]}`;
}

function table(rows: string[][]): string {
  const text = alignTabs(rows.map((r) => `${r.join("\t")}\n`).join(""), TABLE);
  return text
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => `    ${l}\n`)
    .join("");
}

function facts(h: DeviceHealth): string {
  const lines = [`  Collected:\t${new Date(h.collectedAt).toISOString()}`];
  if (h.bootTime !== undefined) lines.push(`  Boot time:\t${new Date(h.bootTime).toISOString()}`);
  if (h.uptimeSeconds !== undefined)
    lines.push(
      `  Uptime:\t${Math.floor(h.uptimeSeconds / 3600)}h${Math.floor((h.uptimeSeconds % 3600) / 60)}m`,
    );
  if (h.load !== undefined) lines.push(`  Load:\t${h.load.map((l) => l.toFixed(2)).join(" ")}`);
  const temps = h.temperatures.map((t) => `${t.type || t.zone} ${t.celsius.toFixed(1)}°C`);
  lines.push(`  Temperature:\t${temps.join(", ") || "<none>"}`);
  if (h.throttled !== undefined)
    lines.push(
      `  Throttled:\t0x${h.throttled.raw.toString(16)} (${h.throttled.flags.join(", ") || "none"})`,
    );
  for (const s of h.storage ?? [])
    lines.push(
      `  Storage wear:\t${s.device} ${s.lifeUsedPercent ?? "?"}% used, pre-EOL ${s.preEol ?? "?"}`,
    );
  return `${lines.join("\n")}\n`;
}

/** The "Health:" section of describe node, from the hub's health view. */
export function describeHealth(view: NodeHealthView): string {
  const h = view.latest;
  if (h === undefined) return "Health:\t<none reported>\n";
  let out = `Health:\n${facts(h)}  Filesystems:\n`;
  out += table([
    ["MOUNTPOINT", "DEVICE", "TYPE", "SIZE", "USED", "AVAIL", "USE%"],
    ...h.filesystems.map((f) => [
      f.mountpoint,
      f.device,
      f.fsType,
      size(f.totalBytes),
      size(f.usedBytes),
      size(f.availableBytes),
      `${f.totalBytes > 0 ? Math.round((f.usedBytes / f.totalBytes) * 100) : 0}%`,
    ]),
  ]);
  out += "  Interfaces:\n";
  out += table([
    ["NAME", "STATE", "ADDRESSES", "RX", "TX"],
    ...h.interfaces.map((i) => [
      i.name,
      i.state ?? "-",
      i.addresses.join(",") || "-",
      i.rxBytes === undefined ? "-" : size(i.rxBytes),
      i.txBytes === undefined ? "-" : size(i.txBytes),
    ]),
  ]);
  out += `  History:\t${view.history.length} reports since ${new Date(view.history[0]?.collectedAt ?? h.collectedAt).toISOString()}\n`;
  return out;
}

function describeNodeHeader(node: Node): string {
  const a = node.metadata.annotations ?? {};
  return [
    `Name:\t${node.metadata.name}`,
    `Online:\t${a["hub.fleetlet.io/online"] ?? "unknown"}`,
    `Last seen:\t${a["hub.fleetlet.io/last-seen"] ?? "<never>"}`,
    `Version:\t${node.status.nodeInfo?.kubeletVersion ?? ""}`,
    "",
  ].join("\n");
}

export async function describeNodeCommand(argv: string[], io: CliIO): Promise<number> {
  const { flags: f, positionals } = parseArgs(argv, flags);
  if (f.help) {
    io.stdout(USAGE);
    return 0;
  }
  const [name, ...extra] = positionals;
  if (name === undefined || extra.length > 0)
    throw new UsageError(`describe node takes one node name\n${USAGE}`);
  const target = hubTarget(f, io);
  const path = `/api/v1/nodes/${encodeURIComponent(name)}`;
  const node = await hubRequest<Node>(target, "GET", path);
  const health = await hubRequest<NodeHealthView>(target, "GET", `${path}/health`);
  io.stdout(describeNodeHeader(node) + describeHealth(health));
  return 0;
}
