// `fleetlet hub upgrade NAME --version V [...]`, `hub upgrade list` and `hub upgrade delete NAME`:
// agent rollouts on the hub (docs/hub-releases.md, "Rolling a release out to a fleet"). Where
// one stands: `fleetlet rollout status agentrollout/NAME` (rollout-agent.ts).
import { parseDuration } from "../api/duration.ts";
import type { AgentRolloutView } from "../hub/rollouts/observe.ts";
import { RESULT_HEADER } from "../hub/rollouts/spec.ts";
import { type FlagSpecs, parseArgs } from "./args.ts";
import { UsageError } from "./errors.ts";
import { hubCall, hubRequest, hubTarget } from "./hub-client.ts";
import type { CliIO } from "./io.ts";
import { age, parseOutputFormat, printObjects } from "./printers.ts";
import { alignTabs, TABLE } from "./tabwriter.ts";

const HUB_UPGRADE_USAGE = `usage: fleetlet hub upgrade NAME --version V [-l SELECTOR] [--canary 1] [--max-unavailable 1|25%]
            [--progress-deadline 10m] [--no-auto-rollback] --hub URL [--token T]
       fleetlet hub upgrade list --hub URL [--token T] [-o json|yaml]
       fleetlet hub upgrade delete NAME --hub URL [--token T]
Creates or changes the agent rollout NAME: the nodes matching SELECTOR (every node without one)
are taken to release V (pushed with \`fleetlet hub release push\`), a canary first, then at most
--max-unavailable at a time; a node whose agent refuses V, is rolled back from it or is not
healthy within --progress-deadline stops the rollout, and the nodes that got V are sent their
previous version again (unless --no-auto-rollback). Flags not given take the defaults shown, also
when NAME exists. Follow it with \`fleetlet rollout status agentrollout/NAME\`; pause, resume and undo it with \`fleetlet rollout\`.
Deleting it leaves every node's wanted release as it is.
`;

const flags = {
  hub: { type: "string" },
  token: { type: "string" },
  "ca-file": { type: "string" },
  version: { type: "string" },
  selector: { type: "string", short: "l" },
  canary: { type: "string" },
  "max-unavailable": { type: "string" },
  "progress-deadline": { type: "string" },
  "no-auto-rollback": { type: "boolean" },
  output: { type: "string", short: "o" },
  help: { type: "boolean", short: "h" },
} as const satisfies FlagSpecs;

/** The API path of the agent rollouts, or of rollout `name`. */
export const agentRolloutPath = (name?: string) =>
  `/api/v1/agentrollouts${name === undefined ? "" : `/${encodeURIComponent(name)}`}`;

/** "3" → 3, "25%" stays; anything else is a UsageError naming the flag. */
function intOrPercent(v: string | undefined, flag: string): number | string | undefined {
  if (v === undefined) return undefined;
  if (/^\d+$/.test(v)) return Number(v);
  if (/^\d+%$/.test(v)) return v;
  throw new UsageError(`invalid argument "${v}" for "--${flag}" flag: want N or N%`);
}

function specOf(f: ReturnType<typeof parseArgs<typeof flags>>["flags"]): Record<string, unknown> {
  if (f.version === undefined)
    throw new UsageError(`hub upgrade NAME needs --version V\n${HUB_UPGRADE_USAGE}`);
  const canary = intOrPercent(f.canary, "canary");
  const maxUnavailable = intOrPercent(f["max-unavailable"], "max-unavailable");
  const deadline = f["progress-deadline"];
  return {
    version: f.version,
    selector: f.selector ?? "",
    ...(canary !== undefined && { canary }),
    ...(maxUnavailable !== undefined && { maxUnavailable }),
    ...(deadline !== undefined && {
      progressDeadlineSeconds: Math.max(1, Math.ceil(parseDuration(deadline) / 1000)),
    }),
    autoRollback: f["no-auto-rollback"] !== true,
  };
}

async function upgrade(name: string, argv: string[], io: CliIO): Promise<number> {
  const { flags: f, positionals } = parseArgs(argv, flags);
  if (f.help) {
    io.stdout(HUB_UPGRADE_USAGE);
    return 0;
  }
  if (positionals.length > 0)
    throw new UsageError(`hub upgrade takes one rollout name\n${HUB_UPGRADE_USAGE}`);
  const spec = specOf(f);
  const res = await hubCall<AgentRolloutView>(
    hubTarget(f, io),
    "PUT",
    agentRolloutPath(name),
    spec,
  );
  io.stdout(`agentrollout/${name} ${res.headers.get(RESULT_HEADER) ?? "configured"}\n`);
  return 0;
}

/** The table: NAME VERSION SELECTOR PHASE UPDATED HEALTHY AGE. */
function printTable(items: AgentRolloutView[], now: number): string {
  const header = ["NAME", "VERSION", "SELECTOR", "PHASE", "UPDATED", "HEALTHY", "AGE"];
  const rows = items.map((v) =>
    [
      v.metadata.name,
      v.spec.version,
      v.spec.selector || "<all>",
      v.phase,
      `${v.counts.updated}/${v.counts.members}`,
      `${v.counts.healthy}/${v.counts.members}`,
      age(v.metadata.creationTimestamp, now),
    ].join("\t"),
  );
  return alignTabs([header.join("\t"), ...rows].map((r) => `${r}\n`).join(""), TABLE);
}

async function list(argv: string[], io: CliIO): Promise<number> {
  const { flags: f, positionals } = parseArgs(argv, flags);
  if (positionals.length > 0)
    throw new UsageError(`hub upgrade list takes no argument\n${HUB_UPGRADE_USAGE}`);
  const format = parseOutputFormat(f.output);
  const res = await hubRequest<{ items: AgentRolloutView[] }>(
    hubTarget(f, io),
    "GET",
    agentRolloutPath(),
  );
  if (format === "json" || format === "yaml") io.stdout(printObjects(res, format));
  else if (res.items.length === 0) io.stderr("No agent rollouts found\n");
  else io.stdout(printTable(res.items, io.now()));
  return 0;
}

async function remove(argv: string[], io: CliIO): Promise<number> {
  const { flags: f, positionals } = parseArgs(argv, flags);
  const [name, ...extra] = positionals;
  if (name === undefined || extra.length > 0)
    throw new UsageError(`hub upgrade delete takes one rollout name\n${HUB_UPGRADE_USAGE}`);
  await hubRequest(hubTarget(f, io), "DELETE", agentRolloutPath(name));
  io.stdout(`agentrollout/${name} deleted\n`);
  return 0;
}

/** `fleetlet hub upgrade ...`. */
export function hubUpgradeCommand(argv: string[], io: CliIO): Promise<number> {
  const [first, ...rest] = argv;
  if (first === "list") return list(rest, io);
  if (first === "delete") return remove(rest, io);
  if (first === undefined || first.startsWith("-")) {
    io.stdout(HUB_UPGRADE_USAGE);
    return Promise.resolve(first === undefined ? 2 : 0);
  }
  return upgrade(first, rest, io);
}
