// `fleetlet rollout status|history|undo daemonset/NAME --hub` and `fleetlet get daemonsets --hub`,
// with kubectl's wording and columns, and fleetlet's rollout facts: which device is on which
// revision, and why a rollout stopped. Agent rollouts (agentrollout/NAME): rollout-agent.ts.

import { daemonSetTable } from "../api/columns.ts";
import type { ControllerRevision, DaemonSet } from "../api/daemonset.ts";
import type { DeviceRollout, RolloutView } from "../hub/deploy/status.ts";
import { type FlagSpecs, parseArgs } from "./args.ts";
import { CliError, UsageError } from "./errors.ts";
import { type HubTarget, hubRequest, hubTarget } from "./hub-client.ts";
import type { CliIO } from "./io.ts";
import { parseOutputFormat, printObjects } from "./printers.ts";
import { agentRolloutCommand, agentRolloutName } from "./rollout-agent.ts";
import { type WatchFlags, watchRollout } from "./rollout-watch.ts";
import { alignTabs, TABLE } from "./tabwriter.ts";

const flags = {
  namespace: { type: "string", short: "n" },
  hub: { type: "string" },
  token: { type: "string" },
  "ca-file": { type: "string" },
  revision: { type: "int" },
  "to-revision": { type: "int" },
  watch: { type: "boolean", short: "w" },
  timeout: { type: "string" },
  interval: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const satisfies FlagSpecs;

export const ROLLOUT_USAGE = `usage: fleetlet rollout status daemonset/NAME --hub URL [--token T] [-n NS] [--watch=false] [--timeout 10m]
       fleetlet rollout history daemonset/NAME --hub URL [--token T] [-n NS] [--revision N]
       fleetlet rollout undo daemonset/NAME --hub URL [--token T] [-n NS] [--to-revision N]
       fleetlet rollout status agentrollout/NAME --hub URL [--token T] [--watch=false] [--timeout 10m]
       fleetlet rollout pause|resume|undo agentrollout/NAME --hub URL [--token T]
`;

function dsPath(ns: string, name: string): string {
  return `/apis/apps/v1/namespaces/${encodeURIComponent(ns)}/daemonsets/${encodeURIComponent(name)}`;
}

/** "daemonset/web", "ds/web", "daemonset web" → "web". */
function targetName(positionals: string[]): string {
  const [first, second, ...extra] = positionals;
  if (first === undefined) throw new UsageError(`rollout needs daemonset/NAME\n${ROLLOUT_USAGE}`);
  const slash = first.indexOf("/");
  const [kind, name] =
    slash < 0 ? [first, second] : [first.slice(0, slash), first.slice(slash + 1)];
  const rest = slash < 0 ? extra : [second, ...extra].filter((x) => x !== undefined);
  if (
    !["daemonset", "daemonsets", "ds", "daemonset.apps"].includes(kind ?? "") ||
    !name ||
    rest.length > 0
  )
    throw new UsageError(`rollout knows daemonset/NAME and agentrollout/NAME\n${ROLLOUT_USAGE}`);
  return name;
}

/** Devices and their revisions, as a table (problems first). */
export function printDevices(devices: DeviceRollout[]): string {
  const rank = (d: DeviceRollout) => (d.state === "Updated" ? 2 : d.state === "Waiting" ? 1 : 0);
  const rows = [...devices]
    .sort((a, b) => rank(a) - rank(b) || a.name.localeCompare(b.name))
    .map((d) =>
      [d.name, d.revision ?? "<none>", d.running ?? "<none>", d.state, d.message ?? ""].join("\t"),
    );
  return alignTabs(
    [["DEVICE", "REVISION", "RUNNING", "STATE", "MESSAGE"].join("\t"), ...rows]
      .map((r) => `${r}\n`)
      .join(""),
    TABLE,
  );
}

function status(
  io: CliIO,
  target: HubTarget,
  ns: string,
  name: string,
  f: WatchFlags,
): Promise<number> {
  return watchRollout(io, f, async () => {
    const view = await hubRequest<RolloutView>(target, "GET", `${dsPath(ns, name)}/rollout`);
    const table = () => printDevices(view.devices);
    if (view.phase === "Complete")
      return { done: `daemon set "${name}" successfully rolled out${offlineNote(view)}\n` };
    if (view.phase === "Failed") return { failed: `daemon set "${name}" ${view.message}`, table };
    return {
      waiting: `Waiting for daemon set "${name}" rollout to finish: ${view.message}...\n`,
      table,
    };
  });
}

function offlineNote(view: RolloutView): string {
  const offline = view.devices.filter((d) => d.state === "Offline").map((d) => d.name);
  if (offline.length === 0) return "";
  return ` to every online device; ${offline.length} offline (${offline.slice(0, 5).join(", ")}${offline.length > 5 ? ", ..." : ""}) will be updated when back`;
}

async function history(
  io: CliIO,
  target: HubTarget,
  ns: string,
  name: string,
  revision: number | undefined,
): Promise<number> {
  const list = await hubRequest<{ items: ControllerRevision[] }>(
    target,
    "GET",
    `${dsPath(ns, name)}/history`,
  );
  if (revision !== undefined && revision > 0) {
    const r = list.items.find((x) => x.revision === revision);
    if (r === undefined) throw new CliError(`unable to find the specified revision`);
    io.stdout(
      `daemonset.apps/${name} with revision #${revision}\nPod Template:\n${printObjects(r.data.spec.template, "yaml")}`,
    );
    return 0;
  }
  const rows = list.items.map(
    (r) => `${r.revision}\t${r.metadata.annotations?.["kubernetes.io/change-cause"] ?? "<none>"}\n`,
  );
  io.stdout(
    `daemonset.apps/${name} \n${alignTabs(`REVISION\tCHANGE-CAUSE\n${rows.join("")}`, { minWidth: 0, padding: 2 })}\n`,
  );
  return 0;
}

/** `fleetlet rollout status|history|undo daemonset/NAME --hub URL`, and agent rollouts. */
export async function rolloutCommand(argv: string[], io: CliIO): Promise<number> {
  const { flags: f, positionals } = parseArgs(argv, flags);
  if (f.help) {
    io.stdout(ROLLOUT_USAGE);
    return 0;
  }
  const [verb, ...rest] = positionals;
  if (f.hub === undefined) throw new UsageError("rollouts are run by the hub: add --hub URL");
  const target = hubTarget(f, io);
  const agent = agentRolloutName(rest);
  if (agent !== undefined) return agentRolloutCommand(verb, agent, target, f, io, ROLLOUT_USAGE);
  const ns = f.namespace ?? "default";
  const name = targetName(rest);
  switch (verb) {
    case "status":
      return status(io, target, ns, name, f);
    case "history":
      return history(io, target, ns, name, f.revision);
    case "undo": {
      const r = await hubRequest<{ revision: number; changed: boolean }>(
        target,
        "POST",
        `${dsPath(ns, name)}/rollback`,
        {
          ...(f["to-revision"] !== undefined && { toRevision: f["to-revision"] }),
        },
      );
      io.stdout(
        r.changed
          ? `daemonset.apps/${name} rolled back\n`
          : `daemonset.apps/${name} skipped rollback (current template already matches revision ${r.revision})\n`,
      );
      return 0;
    }
    default:
      throw new UsageError(
        `unknown rollout command ${JSON.stringify(verb ?? "")}\n${ROLLOUT_USAGE}`,
      );
  }
}

/** kubectl's DaemonSet table: NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE. */
export function printDaemonSetTable(
  items: DaemonSet[],
  now: number,
  opts: { wide?: boolean; withNamespace?: boolean } = {},
): string {
  const header = [
    "NAME",
    "DESIRED",
    "CURRENT",
    "READY",
    "UP-TO-DATE",
    "AVAILABLE",
    "NODE SELECTOR",
    "AGE",
  ];
  if (opts.withNamespace) header.unshift("NAMESPACE");
  if (opts.wide) header.push("CONTAINERS", "IMAGES", "SELECTOR");
  const rows = items.map((d) => {
    const cells = daemonSetTable.cells(d, now).map(String);
    const row = cells.slice(0, 8);
    if (opts.withNamespace) row.unshift(d.metadata.namespace ?? "default");
    if (opts.wide) row.push(...cells.slice(8));
    return row;
  });
  return alignTabs([header, ...rows].map((r) => `${r.join("\t")}\n`).join(""), TABLE);
}

/** `fleetlet get daemonsets [NAME] --hub URL [-n NS | -A] [-o wide|json|yaml]`. */
export async function getDaemonSets(
  name: string | undefined,
  f: {
    hub?: string;
    token?: string;
    output?: string;
    namespace?: string;
    "all-namespaces"?: boolean;
  },
  io: CliIO,
): Promise<number> {
  const target = hubTarget(f, io);
  const format = parseOutputFormat(f.output);
  const all = f["all-namespaces"] === true && name === undefined;
  const ns = f.namespace ?? "default";
  const items =
    name !== undefined
      ? [await hubRequest<DaemonSet>(target, "GET", dsPath(ns, name))]
      : (
          await hubRequest<{ items: DaemonSet[] }>(
            target,
            "GET",
            all
              ? "/apis/apps/v1/daemonsets"
              : `/apis/apps/v1/namespaces/${encodeURIComponent(ns)}/daemonsets`,
          )
        ).items;
  if (format === "json" || format === "yaml") {
    io.stdout(printObjects(name !== undefined ? items[0] : items, format));
    return 0;
  }
  if (items.length === 0) {
    io.stderr(all ? "No resources found\n" : `No resources found in ${ns} namespace.\n`);
    return 0;
  }
  io.stdout(printDaemonSetTable(items, io.now(), { wide: format === "wide", withNamespace: all }));
  return 0;
}
