// Agent rollouts wired over the hub's parts: their store, the fleet, releases and node updates, and
// the agents' sessions that offer a changed wish; the pass runs every `intervalMs` until `signal`.
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import type { Fleet } from "../fleet.ts";
import type { Leadership } from "../leader.ts";
import type { Releases } from "../releases/store.ts";
import type { NodeUpdates } from "../updates/updates.ts";
import { AgentRollouts } from "./controller.ts";
import type { AgentRolloutStore } from "./store.ts";

export { AgentRollouts } from "./controller.ts";

interface RolloutParts {
  rolloutStore: AgentRolloutStore;
  fleet: Pick<Fleet, "nodes" | "isOnline">;
  releases: Pick<Releases, "list">;
  updates: NodeUpdates;
  /** Only the leading replica runs passes (leader.ts). */
  leadership: Pick<Leadership, "term">;
}

/** The agent rollouts of the hub, loaded from their store, their loop started. */
export async function startAgentRollouts(
  parts: RolloutParts,
  sessions: { updateChanged(node: string): void },
  opts: { clock: Clock; log: Logger },
  intervalMs: number,
  signal: AbortSignal,
): Promise<AgentRollouts> {
  const { fleet } = parts;
  const loaded = await parts.rolloutStore.load();
  const rollouts = new AgentRollouts(
    {
      store: parts.rolloutStore,
      nodes: () =>
        [...fleet.nodes.values()]
          .filter((rec) => rec.revokedAt === undefined)
          .map((rec) => ({
            name: rec.name,
            labels: { ...rec.node?.metadata.labels, ...rec.hubLabels },
          })),
      online: (node) => fleet.isOnline(node),
      updates: parts.updates,
      hasRelease: async (version) =>
        (await parts.releases.list()).some((r) => r.version === version),
      changed: (node) => sessions.updateChanged(node),
      clock: opts.clock,
      log: opts.log.with({ component: "agentrollouts" }),
      leadTerm: () => parts.leadership.term(),
    },
    loaded,
  );
  void rollouts.run(signal, intervalMs);
  return rollouts;
}
