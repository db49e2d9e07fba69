// `fleetlet apply -f`, `fleetlet delete -f | daemonset NAME` and `fleetlet label node` against the
// hub (docs/deploy.md). Everything in the files is validated before the first object is sent.
import type { Node } from "../api/node.ts";
import { type FlagSpecs, parseArgs } from "./args.ts";
import { CliError, UsageError } from "./errors.ts";
import { hubCall, hubRequest, hubTarget } from "./hub-client.ts";
import type { CliIO } from "./io.ts";
import { readObjects } from "./objects.ts";

const flags = {
  filename: { type: "string", short: "f" },
  namespace: { type: "string", short: "n" },
  hub: { type: "string" },
  token: { type: "string" },
  "ca-file": { type: "string" },
  overwrite: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const satisfies FlagSpecs;

export const APPLY_USAGE = `usage: fleetlet apply -f FILE|DIR --hub URL [--token T] [-n NS]
  Sends DaemonSets, and the ConfigMaps and Secrets their pods use, to the hub, which deploys the
  DaemonSets to the devices they select (each device gets only the objects its pods use). A
  folder means its .yaml, .yml and .json files; every object is validated first, and one invalid
  object stops the whole apply.
`;

export const DELETE_USAGE = `usage: fleetlet delete -f FILE|DIR --hub URL [--token T] [-n NS]
       fleetlet delete daemonset|configmap|secret NAME --hub URL [--token T] [-n NS]
`;

export const LABEL_USAGE = `usage: fleetlet label node NAME KEY=VALUE... [KEY-...] --hub URL [--token T] [--overwrite]
  Sets (KEY=VALUE) or removes (KEY-) the hub's labels of a device; DaemonSet pods follow.
`;

/** The kinds `delete KIND NAME` knows: kubectl's resource name and the API path of the list. */
const deleteKinds: Record<string, { resource: string; path: string }> = {
  daemonset: { resource: "daemonset.apps", path: "/apis/apps/v1/namespaces/NS/daemonsets" },
  configmap: { resource: "configmap", path: "/api/v1/namespaces/NS/configmaps" },
  secret: { resource: "secret", path: "/api/v1/namespaces/NS/secrets" },
};
const kindWords: Record<string, string> = {
  daemonset: "daemonset",
  daemonsets: "daemonset",
  ds: "daemonset",
  "daemonset.apps": "daemonset",
  configmap: "configmap",
  configmaps: "configmap",
  cm: "configmap",
  secret: "secret",
  secrets: "secret",
};

/** `fleetlet apply -f FILE|DIR`. */
export async function applyCommand(argv: string[], io: CliIO): Promise<number> {
  const { flags: f, positionals } = parseArgs(argv, flags);
  if (f.help) {
    io.stdout(APPLY_USAGE);
    return 0;
  }
  if (positionals.length > 0)
    throw new UsageError(`apply takes -f FILE|DIR, not arguments\n${APPLY_USAGE}`);
  const target = hubTarget(f, io);
  const objects = readObjects(f.filename === undefined ? [] : [f.filename], f.namespace, "applied");
  for (const o of objects) {
    const r = await hubCall(target, "PUT", o.path, o.object);
    io.stdout(`${o.resource}/${o.name} ${r.headers.get("fleetlet-apply") ?? "configured"}\n`);
  }
  return 0;
}

/** `fleetlet delete -f FILE|DIR` or `fleetlet delete daemonset NAME`. */
export async function deleteCommand(argv: string[], io: CliIO): Promise<number> {
  const { flags: f, positionals } = parseArgs(argv, flags);
  if (f.help) {
    io.stdout(DELETE_USAGE);
    return 0;
  }
  const target = hubTarget(f, io);
  const [kind, name, ...extra] = positionals;
  let items: { resource: string; name: string; path: string }[];
  if (f.filename !== undefined) {
    if (positionals.length > 0) throw new UsageError(`delete -f takes no names\n${DELETE_USAGE}`);
    items = readObjects([f.filename], f.namespace, "deleted");
  } else {
    const known = deleteKinds[kindWords[kind ?? ""] ?? ""];
    if (known === undefined || name === undefined || extra.length > 0)
      throw new UsageError(`delete takes -f FILE|DIR, or a kind and a NAME\n${DELETE_USAGE}`);
    const ns = encodeURIComponent(f.namespace ?? "default");
    items = [
      {
        resource: known.resource,
        name,
        path: `${known.path.replace("NS", ns)}/${encodeURIComponent(name)}`,
      },
    ];
  }
  let failed = 0;
  for (const o of items) {
    try {
      await hubCall(target, "DELETE", o.path);
      io.stdout(`${o.resource} "${o.name}" deleted\n`);
    } catch (err) {
      if (!(err instanceof CliError)) throw err;
      io.stderr(`${err.message}\n`);
      failed++;
    }
  }
  return failed === 0 ? 0 : 1;
}

/** Parses `k=v` (set) and `k-` (remove) arguments into a merge patch of labels. */
export function parseLabelArgs(args: string[]): Record<string, string | null> {
  const patch: Record<string, string | null> = {};
  for (const a of args) {
    if (a.endsWith("-") && !a.includes("=")) patch[a.slice(0, -1)] = null;
    else {
      const i = a.indexOf("=");
      if (i <= 0)
        throw new UsageError(`invalid label ${JSON.stringify(a)}: want KEY=VALUE or KEY-`);
      patch[a.slice(0, i)] = a.slice(i + 1);
    }
  }
  return patch;
}

/** `fleetlet label node NAME k=v ... [k-] --hub URL [--overwrite]`. */
export async function labelCommand(argv: string[], io: CliIO): Promise<number> {
  const { flags: f, positionals } = parseArgs(argv, flags);
  if (f.help) {
    io.stdout(LABEL_USAGE);
    return 0;
  }
  const [kind, name, ...rest] = positionals;
  if (
    kind === undefined ||
    !["node", "nodes", "no"].includes(kind) ||
    name === undefined ||
    rest.length === 0
  )
    throw new UsageError(
      `label takes node NAME and at least one KEY=VALUE or KEY-\n${LABEL_USAGE}`,
    );
  if (f.hub === undefined)
    throw new UsageError(
      "labels are set on the hub: add --hub URL (a device's own labels are its nodeLabels)",
    );
  const target = hubTarget(f, io);
  const patch = parseLabelArgs(rest);
  const path = `/api/v1/nodes/${encodeURIComponent(name)}`;
  const node = await hubRequest<Node>(target, "GET", path);
  const current = node.metadata.labels ?? {};
  for (const [k, v] of Object.entries(patch)) {
    const have = current[k];
    if (v !== null && have !== undefined && have !== v && f.overwrite !== true)
      throw new CliError(`'${k}' already has a value (${have}), and --overwrite is false`);
  }
  await hubRequest(target, "PATCH", path, { metadata: { labels: patch } });
  const removing = Object.values(patch).every((v) => v === null);
  io.stdout(`node/${name} ${removing ? "unlabeled" : "labeled"}\n`);
  return 0;
}
