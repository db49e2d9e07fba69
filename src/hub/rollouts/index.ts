// Agent rollouts wired over the hub's parts: its database, fleet, releases and node updates, and
// the agents' sessions that offer a changed wish; the pass runs every `intervalMs` until `signal`.
import type { Database } from "bun:sqlite";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import type { Fleet } from "../fleet.ts";
import type { ReleaseStore } from "../releases/store.ts";
import type { NodeUpdates } from "../updates/updates.ts";
import { AgentRollouts } from "./controller.ts";
import { AgentRolloutStore } from "./store.ts";

export { AgentRollouts } from "./controller.ts";

interface RolloutParts {
  store: { database: Database };
  fleet: Pick<Fleet, "nodes" | "isOnline">;
  releases: Pick<ReleaseStore, "list">;
  updates: NodeUpdates;
}

/** The agent rollouts of the hub, their loop started. */
export function startAgentRollouts(
  parts: RolloutParts,
  sessions: { updateChanged(node: string): void },
  opts: { clock: Clock; log: Logger },
  intervalMs: number,
  signal: AbortSignal,
): AgentRollouts {
  const { fleet } = parts;
  const rollouts = new AgentRollouts({
    store: new AgentRolloutStore(parts.store.database),
    nodes: () =>
      [...fleet.nodes.values()]
        .filter((rec) => rec.revokedAt === undefined)
        .map((rec) => ({
          name: rec.name,
          labels: { ...rec.node?.metadata.labels, ...rec.hubLabels },
        })),
    online: (node) => fleet.isOnline(node),
    updates: parts.updates,
    hasRelease: async (version) => (await parts.releases.list()).some((r) => r.version === version),
    changed: (node) => sessions.updateChanged(node),
    clock: opts.clock,
    log: opts.log.with({ component: "agentrollouts" }),
  });
  void rollouts.run(signal, intervalMs);
  return rollouts;
}
