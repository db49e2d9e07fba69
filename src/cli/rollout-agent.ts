// `fleetlet rollout status|pause|resume|undo agentrollout/NAME --hub`: an agent rollout
// (docs/hub-releases.md, "Rolling a release out to a fleet") with kubectl's wording: waiting
// lines until it is done, and which node runs what.
import { parseDuration } from "../api/duration.ts";
import type { AgentRolloutView } from "../hub/rollouts/observe.ts";
import { CliError, UsageError } from "./errors.ts";
import { type HubTarget, hubRequest } from "./hub-client.ts";
import type { CliIO } from "./io.ts";
import { alignTabs, TABLE } from "./tabwriter.ts";

/** "agentrollout/x", "agentrollout x" → "x"; undefined for another kind. */
export function agentRolloutName(positionals: string[]): string | undefined {
  const [first, second, ...extra] = positionals;
  if (first === undefined) return undefined;
  const slash = first.indexOf("/");
  const [kind, name] =
    slash < 0 ? [first, second] : [first.slice(0, slash), first.slice(slash + 1)];
  if (kind !== "agentrollout" && kind !== "agentrollouts") return undefined;
  const rest = slash < 0 ? extra : [second, ...extra].filter((x) => x !== undefined);
  if (!name || rest.length > 0) throw new UsageError("rollout takes one agentrollout/NAME");
  return name;
}

/** The members as a table: NODE ONLINE RUNNING FROM WANTED PHASE REASON. */
function printNodes(view: AgentRolloutView): string {
  const rows = view.nodes.map((n) =>
    [
      n.node,
      n.online ? "yes" : "no",
      n.running ?? "<unknown>",
      n.from ?? "-",
      n.wanted ?? "-",
      n.phase ?? "-",
      n.reason ?? "-",
    ].join("\t"),
  );
  const header = ["NODE", "ONLINE", "RUNNING", "FROM", "WANTED", "PHASE", "REASON"];
  return alignTabs([header.join("\t"), ...rows].map((r) => `${r}\n`).join(""), TABLE);
}

const viewPath = (name: string) => `/api/v1/agentrollouts/${encodeURIComponent(name)}`;

async function status(
  io: CliIO,
  target: HubTarget,
  name: string,
  f: { watch?: boolean; timeout?: string; interval?: string },
): Promise<number> {
  const deadline =
    io.now() + (f.timeout === undefined ? Number.POSITIVE_INFINITY : parseDuration(f.timeout));
  const every = f.interval === undefined ? 500 : parseDuration(f.interval);
  let last = "";
  for (;;) {
    const view = await hubRequest<AgentRolloutView>(target, "GET", viewPath(name));
    if (view.phase === "Complete") {
      const off = view.counts.offline;
      const note = off === 0 ? "" : `; ${off} offline node(s) will be updated when back`;
      io.stdout(`agent rollout "${name}" successfully rolled out${note}\n`);
      return 0;
    }
    if (view.phase === "Failed" || view.phase === "RolledBack") {
      io.stdout(printNodes(view));
      throw new CliError(`agent rollout "${name}" ${view.message}`);
    }
    const line = `Waiting for agent rollout "${name}" to finish: ${view.message}...\n`;
    if (line !== last) io.stdout(line);
    last = line;
    if (f.watch === false) {
      io.stdout(printNodes(view));
      return 0;
    }
    if (io.now() > deadline) throw new CliError(`timed out waiting for the condition`);
    await Bun.sleep(every);
  }
}

const DONE = { pause: "paused", resume: "resumed", undo: "rolled back" } as const;

/** `fleetlet rollout VERB agentrollout/NAME`. */
export async function agentRolloutCommand(
  verb: string | undefined,
  name: string,
  target: HubTarget,
  f: { watch?: boolean; timeout?: string; interval?: string },
  io: CliIO,
  usage: string,
): Promise<number> {
  if (verb === "status") return status(io, target, name, f);
  if (verb === "pause" || verb === "resume" || verb === "undo") {
    await hubRequest(target, "POST", `${viewPath(name)}/${verb}`);
    io.stdout(`agentrollout/${name} ${DONE[verb]}\n`);
    return 0;
  }
  throw new UsageError(
    `rollout ${verb ?? ""} does not apply to agent rollouts: status, pause, resume, undo\n${usage}`,
  );
}
