// `fleetlet rollout status|pause|resume|undo agentrollout/NAME --hub`: an agent rollout
// (docs/hub-releases.md, "Rolling a release out to a fleet") with kubectl's wording: waiting
// lines until it is done, and which node runs what.
import type { AgentRolloutView } from "../hub/rollouts/observe.ts";
import { UsageError } from "./errors.ts";
import { type HubTarget, hubRequest } from "./hub-client.ts";
import { agentRolloutPath } from "./hub-upgrade.ts";
import type { CliIO } from "./io.ts";
import { type WatchFlags, watchRollout } from "./rollout-watch.ts";
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

function status(io: CliIO, target: HubTarget, name: string, f: WatchFlags): Promise<number> {
  return watchRollout(io, f, async () => {
    const view = await hubRequest<AgentRolloutView>(target, "GET", agentRolloutPath(name));
    const table = () => printNodes(view);
    if (view.phase === "Complete") {
      const off = view.counts.offline;
      const note = off === 0 ? "" : `; ${off} offline node(s) will be updated when back`;
      return { done: `agent rollout "${name}" successfully rolled out${note}\n` };
    }
    if (view.phase === "Failed" || view.phase === "RolledBack")
      return { failed: `agent rollout "${name}" ${view.message}`, table };
    return {
      waiting: `Waiting for agent rollout "${name}" to finish: ${view.message}...\n`,
      table,
    };
  });
}

const DONE = { pause: "paused", resume: "resumed", undo: "rolled back" } as const;

/** `fleetlet rollout VERB agentrollout/NAME`. */
export async function agentRolloutCommand(
  verb: string | undefined,
  name: string,
  target: HubTarget,
  f: WatchFlags,
  io: CliIO,
  usage: string,
): Promise<number> {
  if (verb === "status") return status(io, target, name, f);
  if (verb === "pause" || verb === "resume" || verb === "undo") {
    await hubRequest(target, "POST", `${agentRolloutPath(name)}/${verb}`);
    io.stdout(`agentrollout/${name} ${DONE[verb]}\n`);
    return 0;
  }
  throw new UsageError(
    `rollout ${verb ?? ""} does not apply to agent rollouts: status, pause, resume, undo\n${usage}`,
  );
}
