// The kubectl-like commands against the local agent: get, describe, logs, exec. Each parses its
// own flags (src/cli/args.ts), talks to the agent through src/cli/client.ts and prints what
// kubectl would. They return the exit code; failures are thrown as CliError.

import { parseDuration } from "../api/duration.ts";
import { type FlagSpecs, type Flags, parseArgs } from "./args.ts";
import {
  type AgentClient,
  createAgentClient,
  hubTransport,
  resolveSocketPath,
  type WatchQuery,
} from "./client.ts";
import { describePod } from "./describe.ts";
import { UsageError } from "./errors.ts";
import { getFromHub } from "./hub.ts";
import { hubTarget } from "./hub-client.ts";
import type { CliIO } from "./io.ts";
import { printNodeTable } from "./node-printer.ts";
import {
  type OutputFormat,
  PodWatchTable,
  parseOutputFormat,
  printEventTable,
  printObjects,
  printPodTable,
} from "./printers.ts";
import { execPath, runRemote } from "./remote-exec.ts";
import { getDaemonSets } from "./rollout.ts";

const common = {
  socket: { type: "string" },
  namespace: { type: "string", short: "n" },
  help: { type: "boolean", short: "h" },
} as const satisfies FlagSpecs;

const getFlags = {
  ...common,
  "all-namespaces": { type: "boolean", short: "A" },
  output: { type: "string", short: "o" },
  selector: { type: "string", short: "l" },
  "field-selector": { type: "string" },
  watch: { type: "boolean", short: "w" },
  hub: { type: "string" },
  token: { type: "string" },
  "ca-file": { type: "string" },
} as const satisfies FlagSpecs;

export const GET_USAGE = `usage: fleetlet get pods [NAME] [-n NS | -A] [-o wide|json|yaml] [-l SELECTOR] [--field-selector SEL] [-w]
       fleetlet get events [-n NS | -A] [-o json|yaml]
       fleetlet get node [NAME] [-o wide|json|yaml]
       fleetlet get nodes|pods [NAME] --hub URL [--token T] [-n NS] [-l SELECTOR] [-o wide|json|yaml]
       fleetlet get events --hub URL [--token T] [-n NS] [-o json|yaml]
       fleetlet get daemonsets [NAME] --hub URL [--token T] [-n NS | -A] [-o wide|json|yaml]
flags: --socket PATH (default $FLEETLET_SOCKET or /run/fleetlet/agent.sock)
       -w, --watch: after the pods, print a row (or object) each time one changes, until Ctrl-C
       --token T (default $FLEETLET_HUB_TOKEN), --ca-file F: the HTTPS hub's CA (default $FLEETLET_HUB_CA)
`;

function printHelp(io: CliIO, usage: string): number {
  io.stdout(usage);
  return 0;
}

const podWords = new Set(["pods", "pod", "po"]);
const eventWords = new Set(["events", "event", "ev"]);
const nodeWords = new Set(["nodes", "node", "no"]);
const daemonSetWords = new Set([
  "daemonsets",
  "daemonset",
  "ds",
  "daemonsets.apps",
  "daemonset.apps",
]);

/** `fleetlet get pods|events [NAME]`. */
export async function getCommand(argv: string[], io: CliIO): Promise<number> {
  const { flags, positionals } = parseArgs(argv, getFlags);
  if (flags.help) return printHelp(io, GET_USAGE);
  const [resource, name, ...extra] = positionals;
  if (resource === undefined)
    throw new UsageError(`get needs a resource type: pods or events\n${GET_USAGE}`);
  if (extra.length > 0)
    throw new UsageError(`get takes one name, got ${JSON.stringify([name, ...extra])}`);
  if (flags.hub !== undefined && flags.watch === true) {
    throw new UsageError("--watch works against the local agent, not with --hub");
  }
  if (daemonSetWords.has(resource)) {
    if (flags.hub === undefined)
      throw new UsageError("daemonsets are kept by the hub: add --hub URL (and --token T)");
    return getDaemonSets(name, flags, io);
  }
  if (flags.hub !== undefined) return getFromHub(hubResource(resource, name), name, flags, io);
  const format = parseOutputFormat(flags.output);
  const client = createAgentClient(resolveSocketPath(flags.socket, io.env));
  const all = flags["all-namespaces"] === true && name === undefined;
  const namespace = all ? undefined : (flags.namespace ?? "default");
  const get: LocalGet = { client, name, namespace, all, format, now: io.now(), flags, io };
  if (flags.watch === true && !podWords.has(resource)) {
    throw new UsageError("--watch is only for pods");
  }
  if (podWords.has(resource)) return getPods(get);
  if (eventWords.has(resource)) return getEvents(get);
  if (nodeWords.has(resource)) {
    const node = await client.getNode(name);
    if (format === "json" || format === "yaml") io.stdout(printObjects(node, format));
    else io.stdout(printNodeTable([node], get.now, { wide: format === "wide" }));
    return 0;
  }
  throw new UsageError(
    `the server doesn't have a resource type "${resource}" (fleetlet knows pods, events and node)`,
  );
}

/** A `get` against the local agent, its flags read. */
interface LocalGet {
  client: AgentClient;
  name: string | undefined;
  /** undefined: every namespace (-A). */
  namespace: string | undefined;
  all: boolean;
  format: OutputFormat;
  now: number;
  flags: Flags<typeof getFlags>;
  io: CliIO;
}

/** `get pods [NAME]`, once or watching. */
async function getPods(get: LocalGet): Promise<number> {
  const { client, name, namespace, all, format, now, flags, io } = get;
  if (flags.watch === true) {
    const byName = name === undefined ? undefined : `metadata.name=${name}`;
    const fieldSelector = [flags["field-selector"], byName].filter((x) => x).join(",");
    return watchPods(
      client,
      {
        ...(namespace !== undefined && { namespace }),
        ...(flags.selector !== undefined && { labelSelector: flags.selector }),
        ...(fieldSelector !== "" && { fieldSelector }),
        ...(io.signal !== undefined && { signal: io.signal }),
      },
      format,
      all,
      io,
    );
  }
  if (name !== undefined) {
    const pod = await client.getPod(namespace ?? "default", name);
    if (format === "json" || format === "yaml") io.stdout(printObjects(pod, format));
    else io.stdout(printPodTable([pod], now, { wide: format === "wide" }));
    return 0;
  }
  const list = await client.listPods({
    ...(namespace !== undefined && { namespace }),
    ...(flags.selector !== undefined && { labelSelector: flags.selector }),
    ...(flags["field-selector"] !== undefined && { fieldSelector: flags["field-selector"] }),
  });
  if (format === "json" || format === "yaml") io.stdout(printObjects(list.items, format));
  else if (list.items.length === 0) io.stderr(noResources(namespace));
  else io.stdout(printPodTable(list.items, now, { wide: format === "wide", withNamespace: all }));
  return 0;
}

/** `get events`. */
async function getEvents(get: LocalGet): Promise<number> {
  const { client, name, namespace, all, format, now, flags, io } = get;
  if (name !== undefined) throw new UsageError("get events takes no name; use --field-selector");
  const list = await client.listEvents({
    ...(namespace !== undefined && { namespace }),
    ...(flags["field-selector"] !== undefined && { fieldSelector: flags["field-selector"] }),
  });
  if (format === "json" || format === "yaml") io.stdout(printObjects(list.items, format));
  else if (list.items.length === 0) io.stderr(noResources(namespace));
  else io.stdout(printEventTable(list.items, now, { withNamespace: all }));
  return 0;
}

/** `get pods -w`: a row (or object) for each watch event until the stream or io.signal ends. */
async function watchPods(
  client: AgentClient,
  query: WatchQuery,
  format: OutputFormat,
  all: boolean,
  io: CliIO,
): Promise<number> {
  const rows = new PodWatchTable({ wide: format === "wide", withNamespace: all });
  let documents = 0;
  for await (const { object } of client.watchPods(query)) {
    if (format === "json") io.stdout(printObjects(object, "json"));
    else if (format === "yaml")
      io.stdout(`${documents++ > 0 ? "---\n" : ""}${printObjects(object, "yaml")}`);
    else io.stdout(rows.row(object, io.now()));
  }
  return 0;
}

/** What the hub serves: nodes and pods (all, or one by name) and events (all). */
function hubResource(resource: string, name: string | undefined): "nodes" | "pods" | "events" {
  if (podWords.has(resource)) return "pods";
  if (eventWords.has(resource)) {
    if (name !== undefined) throw new UsageError("get events takes no name");
    return "events";
  }
  if (nodeWords.has(resource)) return "nodes";
  throw new UsageError(
    `the hub doesn't have a resource type "${resource}" (nodes, pods, events, daemonsets)`,
  );
}

function noResources(namespace: string | undefined): string {
  return namespace === undefined
    ? "No resources found\n"
    : `No resources found in ${namespace} namespace.\n`;
}

/** `fleetlet describe pod NAME`. */
export async function describeCommand(argv: string[], io: CliIO): Promise<number> {
  if (argv[0] === "node" || argv[0] === "nodes" || argv[0] === "no")
    return (await import("./describe-node.ts")).describeNodeCommand(argv.slice(1), io);
  const { flags, positionals } = parseArgs(argv, common);
  const usage = "usage: fleetlet describe pod NAME [-n NS] | node NAME --hub URL\n";
  if (flags.help) return printHelp(io, usage);
  const [resource, name, ...extra] = positionals;
  if (resource === undefined || !podWords.has(resource)) {
    throw new UsageError(
      `describe knows pods only, got ${JSON.stringify(resource ?? "")}\n${usage}`,
    );
  }
  if (name === undefined || extra.length > 0)
    throw new UsageError(`describe pod takes one pod name\n${usage}`);
  const client = createAgentClient(resolveSocketPath(flags.socket, io.env));
  const pod = await client.getPod(flags.namespace ?? "default", name);
  const events = await client.podEvents(pod);
  io.stdout(describePod(pod, events, io.now()));
  return 0;
}

const logFlags = {
  ...common,
  container: { type: "string", short: "c" },
  follow: { type: "boolean", short: "f" },
  previous: { type: "boolean", short: "p" },
  tail: { type: "int" },
  since: { type: "string" },
  timestamps: { type: "boolean" },
  hub: { type: "string" },
  token: { type: "string" },
  "ca-file": { type: "string" },
} as const satisfies FlagSpecs;

function sinceSeconds(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  let ms: number;
  try {
    ms = parseDuration(value);
  } catch (err) {
    throw new UsageError(`invalid --since ${JSON.stringify(value)}: ${(err as Error).message}`);
  }
  return Math.max(1, Math.ceil(ms / 1000));
}

/** `fleetlet logs POD [-c C] [-f] [-p] [--tail N] [--timestamps]`. */
export async function logsCommand(argv: string[], io: CliIO): Promise<number> {
  const { flags, positionals } = parseArgs(argv, logFlags);
  const usage =
    "usage: fleetlet logs POD [-c CONTAINER] [-n NS] [-f] [-p|--previous] [--tail N] [--since 10m] [--timestamps]\n" +
    "                     [--hub URL [--token T]]   (through the hub, from the pod's device)\n";
  if (flags.help) return printHelp(io, usage);
  const [pod, ...extra] = positionals;
  if (pod === undefined || extra.length > 0)
    throw new UsageError(`logs takes one pod name\n${usage}`);
  const socket = resolveSocketPath(flags.socket, io.env);
  const client =
    flags.hub === undefined
      ? createAgentClient(socket)
      : createAgentClient(socket, hubTransport(hubTarget(flags, io)));
  const since = sinceSeconds(flags.since);
  const chunks = client.logs(flags.namespace ?? "default", pod, {
    ...(since !== undefined && { sinceSeconds: since }),
    ...(flags.container !== undefined && { container: flags.container }),
    ...(flags.follow !== undefined && { follow: flags.follow }),
    ...(flags.previous !== undefined && { previous: flags.previous }),
    ...(flags.tail !== undefined && flags.tail >= 0 && { tailLines: flags.tail }),
    ...(flags.timestamps !== undefined && { timestamps: flags.timestamps }),
    ...(io.signal !== undefined && { signal: io.signal }),
  });
  for await (const chunk of chunks) io.stdout(chunk);
  return 0;
}

const execFlags = {
  ...common,
  container: { type: "string", short: "c" },
  timeout: { type: "int" },
  stdin: { type: "boolean", short: "i" },
  tty: { type: "boolean", short: "t" },
  hub: { type: "string" },
  token: { type: "string" },
  "ca-file": { type: "string" },
} as const satisfies FlagSpecs;

const EXEC_USAGE =
  "usage: fleetlet exec POD [-c CONTAINER] [-n NS] [-i] [-t] [--timeout SECONDS] [--hub URL [--token T]] -- COMMAND [ARG...]\n" +
  "  -i: pass stdin to the command; -t: a terminal (raw mode, resized with yours); both are\n" +
  "  interactive, as is every exec with --hub (through the hub, to the pod's device)\n";

/** `fleetlet exec POD [-c C] [-i] [-t] [--hub URL] -- CMD...`: exits with the command's code. */
export async function execCommand(argv: string[], io: CliIO): Promise<number> {
  const { flags, positionals, rest } = parseArgs(argv, execFlags);
  if (flags.help) return printHelp(io, EXEC_USAGE);
  const [pod, ...extra] = positionals;
  if (pod === undefined) throw new UsageError(`exec needs a pod name\n${EXEC_USAGE}`);
  if (extra.length > 0) {
    throw new UsageError(
      `exec [POD] [COMMAND] is not supported; use exec [POD] -- [COMMAND]\n${EXEC_USAGE}`,
    );
  }
  if (rest === undefined || rest.length === 0)
    throw new UsageError(`exec needs a command after "--"\n${EXEC_USAGE}`);
  const ns = flags.namespace ?? "default";
  if (flags.hub !== undefined || flags.stdin === true || flags.tty === true)
    return interactiveExec(ns, pod, rest, flags, io);
  const client = createAgentClient(resolveSocketPath(flags.socket, io.env));
  const result = await client.exec(ns, pod, {
    command: rest,
    ...(flags.container !== undefined && { container: flags.container }),
    ...(flags.timeout !== undefined && { timeoutSeconds: flags.timeout }),
  });
  io.stdout(result.stdout);
  io.stderr(result.stderr);
  if (result.exitCode !== 0) io.stderr(`command terminated with exit code ${result.exitCode}\n`);
  return result.exitCode;
}

/** An exec through the hub, or on this device with stdin or a terminal (remote-exec.ts). */
function interactiveExec(
  ns: string,
  pod: string,
  command: string[],
  flags: Flags<typeof execFlags>,
  io: CliIO,
): Promise<number> {
  const stdin = flags.stdin === true;
  const tty = flags.tty === true;
  const path = execPath(ns, pod, {
    command,
    stdin,
    tty,
    ...(flags.container !== undefined && { container: flags.container }),
  });
  return runRemote(flags, io, path, { kind: "exec", stdin, tty });
}
