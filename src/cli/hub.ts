// `fleetlet hub token create (list|revoke: hub-token.ts)|node revoke|node forget|kubeconfig|audit` and
// `fleetlet get nodes|pods|events --hub URL`. The hub client they share is hub-client.ts.
// `fleetlet hub` itself (the server) is hub-serve.ts.

import { parseDuration } from "../api/duration.ts";
import type { Node } from "../api/node.ts";
import type { Pod } from "../api/types.ts";
import { CLOCK_SKEW_WARN_MS, HUB_ANNOTATIONS, type JoinTokenResponse } from "../protocol/index.ts";
import { type FlagSpecs, parseArgs } from "./args.ts";
import { auditCommand } from "./audit.ts";
import { CliError, UsageError } from "./errors.ts";
import { hubRequest, hubTarget } from "./hub-client.ts";
import { hubMigrateCommand } from "./hub-migrate.ts";
import { hubReleaseCommand } from "./hub-release.ts";
import { serveHubCommand } from "./hub-serve.ts";
import { hubTokenCommand } from "./hub-token.ts";
import { hubUpdateCommand } from "./hub-update.ts";
import { hubUpgradeCommand } from "./hub-upgrade.ts";
import type { CliIO } from "./io.ts";
import { kubeconfigCommand } from "./kubeconfig.ts";
import {
  age,
  parseOutputFormat,
  printEventTable,
  printObjects,
  printPodTable,
} from "./printers.ts";
import { alignTabs, TABLE } from "./tabwriter.ts";

export const HUB_USAGE = `usage: fleetlet hub [--listen ADDR] [--data DIR] [--tls-san NAMES]
                    [--tls-cert FILE --tls-key FILE [--tls-ca FILE]] [--plain-http]
                    [--heartbeat-interval 10s] [--rate-limit 50] [--rate-burst 500]
                    [--max-message-bytes 1048576] [--rollout-interval 1s] [--max-streams-per-node 128]
                    [--node-credential-lifetime 2160h] [--serving-cert-lifetime 8760h]
                    [--serving-cert-check-interval 24h] [--secrets-key-file FILE]
                    [--store postgres://USER@HOST:PORT/DB --bus nats://HOST:PORT[,...] [--replica-id ID]
                     [--change-log-retention 10m] [--change-log-max-rows 1000000]
                     [--leader-interval 2s] [--replica-beat-interval 5s]]
                    [--log-level info]
       fleetlet hub token create --hub URL [--token T] [--ca-file F] [--ttl 24h] [--labels k=v,...] [--uses N]
       fleetlet hub token list --hub URL [--token T] [-o json|yaml]   (by id: uses, expiry, revoked)
       fleetlet hub token revoke ID --hub URL [--token T]
       fleetlet hub node revoke NAME --hub URL [--token T]
       fleetlet hub node forget NAME --hub URL [--token T]   (a revoked node: drops it, frees its name)
       fleetlet hub kubeconfig --hub URL [--token T] [--data DIR | --ca-file F | --ca-hash H]   (for kubectl)
       fleetlet hub audit --hub URL [--token T] [--node NAME] [--limit N]   (every exec and port-forward)
       fleetlet hub release push FILE --signature FILE.sig --hub URL [--token T]   (a signed agent release)
       fleetlet hub release list --hub URL [--token T] [-o json]
       fleetlet hub release delete VERSION [--arch A] --hub URL [--token T]
       fleetlet hub update NODE --version V | --cancel --hub URL [--token T]   (the release NODE should run)
       fleetlet hub update status [NODE] --hub URL [--token T] [-o json]
       fleetlet hub upgrade NAME --version V [-l SELECTOR] [--canary 1] [--max-unavailable 1|25%]
                   [--progress-deadline 10m] [--no-auto-rollback] --hub URL [--token T]   (an agent rollout)
       fleetlet hub upgrade list|delete [NAME] --hub URL [--token T]   (follow one: fleetlet rollout status agentrollout/NAME)
       fleetlet hub migrate --from DIR --to postgres://USER@HOST:PORT/DB [--secrets-key-file F]
                   (copies a stopped single hub's data into an empty PostgreSQL database)
Without --tls-cert the hub serves HTTPS with its own CA, made in DIR/tls on the first start (its
hash is logged and carried by every join token); --tls-san adds names to its certificate.
Secrets are stored sealed under the first key of --secrets-key-file (default DIR/secrets.key,
made on the first start); the other keys of the file open what older keys sealed.
--store and --bus go together: the hub is a replica with its state in PostgreSQL and the other
replicas on NATS; give every replica the same --secrets-key-file. The first replica makes the CA,
the serving certificate and the operator token in the store, and every replica writes them into
its DIR. Logs, exec, attach and port-forward at any replica reach a device connected to another
(through NATS). Every write of nodes, pods, events, DaemonSets, ConfigMaps and Secrets is
numbered and logged in PostgreSQL; each replica follows that log (told by NATS, and every 2 s),
so lists and watches (kubectl -w, the dashboard) at any replica show what every replica stored,
with the same resourceVersions. The log keeps --change-log-retention and at most
--change-log-max-rows rows; a watch from a resourceVersion older than that is answered 410 Gone,
and a replica held up past it loads its view again from PostgreSQL (its open watches end 410).
One replica at a time leads: it runs the DaemonSet and agent rollouts (the others try for the
lead every --leader-interval; a dead leader's lead passes on within 15 s). Every replica marks
itself alive in the store every --replica-beat-interval (at most a third of the nodes' offline
time, 3 x --heartbeat-interval); the leader stores offline the nodes held by a replica not seen
alive for the offline time; their agents, when alive, connect to another replica.
Commands with --hub take the operator token (--token, $FLEETLET_HUB_TOKEN) and the hub's CA
(--ca-file, $FLEETLET_HUB_CA; e.g. DIR/tls/ca.crt).
`;

const clientFlags = {
  hub: { type: "string" },
  token: { type: "string" },
  "ca-file": { type: "string" },
  ttl: { type: "string" },
  labels: { type: "string" },
  uses: { type: "int" },
  help: { type: "boolean", short: "h" },
} as const satisfies FlagSpecs;

function parseLabels(s: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (s ?? "").split(",").filter((p) => p !== "")) {
    const i = part.indexOf("=");
    if (i <= 0) throw new UsageError(`invalid --labels entry ${JSON.stringify(part)}: want k=v`);
    out[part.slice(0, i)] = part.slice(i + 1);
  }
  return out;
}

async function tokenCreate(argv: string[], io: CliIO): Promise<number> {
  const { flags } = parseArgs(argv, clientFlags);
  const target = hubTarget(flags, io);
  const res = await hubRequest<JoinTokenResponse>(target, "POST", "/api/v1/join-tokens", {
    ttl: flags.ttl ?? "24h",
    labels: parseLabels(flags.labels),
    ...(flags.uses !== undefined && { uses: flags.uses }),
  });
  io.stdout(`${res.token}\n`);
  const uses =
    res.uses === undefined ? "" : `, good for ${res.uses} join${res.uses === 1 ? "" : "s"}`;
  io.stderr(`join token ${res.id} expires at ${res.expiresAt}${uses}\n`);
  return 0;
}

/** `fleetlet hub node revoke|forget NAME`: POST /api/v1/nodes/NAME/revoke or /forget. */
async function nodeAction(action: "revoke" | "forget", argv: string[], io: CliIO): Promise<number> {
  const { flags, positionals } = parseArgs(argv, clientFlags);
  const [name, ...extra] = positionals;
  if (name === undefined || extra.length > 0)
    throw new UsageError(`hub node ${action} takes one node name\n${HUB_USAGE}`);
  await hubRequest(
    hubTarget(flags, io),
    "POST",
    `/api/v1/nodes/${encodeURIComponent(name)}/${action}`,
  );
  io.stdout(
    action === "revoke"
      ? `node/${name} revoked\n`
      : `node/${name} forgotten (its name may join again)\n`,
  );
  return 0;
}

/** `fleetlet hub ...`. */
export async function hubCommand(argv: string[], io: CliIO): Promise<number> {
  const [a, b, ...rest] = argv;
  if (a === "token" && b === "create") return tokenCreate(rest, io);
  const token = a === "token" ? await hubTokenCommand(b, rest, io) : undefined;
  if (token !== undefined) return token;
  if (a === "kubeconfig") return kubeconfigCommand(argv.slice(1), io);
  if (a === "audit") return auditCommand(argv.slice(1), io);
  if (a === "release") return hubReleaseCommand(argv.slice(1), io);
  if (a === "update") return hubUpdateCommand(argv.slice(1), io);
  if (a === "upgrade") return hubUpgradeCommand(argv.slice(1), io);
  if (a === "migrate") return hubMigrateCommand(argv.slice(1), io);
  if (a === "node" && (b === "revoke" || b === "forget")) return nodeAction(b, rest, io);
  if (a === "token" || a === "node")
    throw new UsageError(
      `unknown hub command ${JSON.stringify(`${a} ${b ?? ""}`.trim())}\n${HUB_USAGE}`,
    );
  return serveHubCommand(argv, io, HUB_USAGE);
}

/** Whether the node's clock skew annotation says its clock is off by more than the hub flags. */
function clockSkewed(skew: string | undefined): boolean {
  if (skew === undefined) return false;
  try {
    return Math.abs(parseDuration(skew)) > CLOCK_SKEW_WARN_MS;
  } catch {
    return false;
  }
}

/** `fleetlet get nodes` output: NAME STATUS ONLINE LAST-SEEN PODS VERSION AGE (+ wide). STATUS
 * is the Ready condition, then ",Revoked", each pressure condition that is True
 * ("Ready,DiskPressure") and ",ClockSkew" for a clock off by more than 2 minutes, so that such a
 * device stands out. */
export function printNodeTable(nodes: Node[], now: number, wide = false): string {
  const header = ["NAME", "STATUS", "ONLINE", "LAST-SEEN", "PODS", "VERSION", "AGE"];
  if (wide) header.push("INTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME");
  if (wide) header.push("CLOCK-SKEW");
  const rows = nodes.map((n) => {
    const ann = n.metadata.annotations ?? {};
    const ready = n.status.conditions?.find((c) => c.type === "Ready");
    const status = [
      ready?.status === "True" ? "Ready" : ready === undefined ? "Unknown" : "NotReady",
      ...(ann[HUB_ANNOTATIONS.revoked] !== undefined ? ["Revoked"] : []),
      ...(n.status.conditions ?? [])
        .filter((c) => c.type !== "Ready" && c.status === "True")
        .map((c) => c.type),
      ...(clockSkewed(ann[HUB_ANNOTATIONS.clockSkew]) ? ["ClockSkew"] : []),
    ].join(",");
    const lastSeen = ann[HUB_ANNOTATIONS.lastSeen];
    const row = [
      n.metadata.name,
      status,
      ann[HUB_ANNOTATIONS.online] === "true" ? "yes" : "no",
      lastSeen === undefined ? "<never>" : `${age(lastSeen, now)} ago`,
      ann[HUB_ANNOTATIONS.pods] ?? "0",
      n.status.nodeInfo?.kubeletVersion ?? "<unknown>",
      age(n.metadata.creationTimestamp, now),
    ];
    if (wide) {
      const info = n.status.nodeInfo;
      const ip = n.status.addresses?.find((a) => a.type === "InternalIP")?.address;
      row.push(ip ?? "<none>", info?.osImage ?? "<unknown>", info?.kernelVersion ?? "<unknown>");
      row.push(info?.containerRuntimeVersion || "<unknown>");
      row.push(ann[HUB_ANNOTATIONS.clockSkew] ?? "<unknown>");
    }
    return row;
  });
  return alignTabs([header, ...rows].map((r) => `${r.join("\t")}\n`).join(""), TABLE);
}

/**
 * `fleetlet get nodes|pods|events [NAME] --hub URL`: returns the exit code. With a name, one node
 * (the hub's `GET /api/v1/nodes/{name}`) or the pods of that name in the namespace (`-n`,
 * default `default`), one per node that reports such a pod; none is an error, as kubectl's.
 */
export async function getFromHub(
  resource: "nodes" | "pods" | "events",
  name: string | undefined,
  flags: { hub?: string; token?: string; output?: string; namespace?: string; selector?: string },
  io: CliIO,
): Promise<number> {
  const target = hubTarget(flags, io);
  const format = parseOutputFormat(flags.output);
  const q = new URLSearchParams();
  const namespace = name !== undefined ? (flags.namespace ?? "default") : flags.namespace;
  if (namespace !== undefined && resource !== "nodes") q.set("namespace", namespace);
  if (flags.selector !== undefined) q.set("labelSelector", flags.selector);
  const qs = q.size > 0 ? `?${q}` : "";
  const list =
    resource === "nodes" && name !== undefined
      ? {
          items: [
            await hubRequest<Node>(target, "GET", `/api/v1/nodes/${encodeURIComponent(name)}`),
          ],
        }
      : await hubRequest<{ items: unknown[] }>(target, "GET", `/api/v1/${resource}${qs}`);
  if (resource === "pods" && name !== undefined) {
    list.items = list.items.filter((p) => (p as Pod).metadata.name === name);
    if (list.items.length === 0)
      throw new CliError(`the hub has no pod "${name}" in namespace "${namespace}"`);
  }
  if (name !== undefined && (format === "json" || format === "yaml") && list.items.length === 1) {
    io.stdout(printObjects(list.items[0], format));
    return 0;
  }
  const now = io.now();
  if (format === "json" || format === "yaml") io.stdout(printObjects(list.items, format));
  else if (list.items.length === 0) io.stderr("No resources found\n");
  else if (resource === "nodes")
    io.stdout(printNodeTable(list.items as Node[], now, format === "wide"));
  else if (resource === "pods")
    io.stdout(printPodTable(list.items as never, now, { wide: true, withNamespace: true }));
  else io.stdout(printEventTable(list.items as never, now, { withNamespace: true }));
  return 0;
}
