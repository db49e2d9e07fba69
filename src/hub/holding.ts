// Which hub replica holds each node (docs/hub-replicas.md, "Agents and replicas"): the replica
// that welcomes a node's agent takes the node in the store (node_sessions) and says so on the bus
// (`taken`); a replica that held it with an older epoch lets it go and closes its connection to
// that agent, as it does when a flush finds the node taken (the store's fence).
import type { Logger } from "../util/log.ts";
import type { Bus } from "./bus.ts";
import type { NodeSessions, StoredNode } from "./node-sessions.ts";
import type { AgentSessions } from "./sessions.ts";

export interface HoldingDeps {
  bus: Bus;
  /** This replica's name, stored with the nodes it takes. */
  replica: string;
  /** The agents' sessions (made after the take function). */
  sessions: () => Pick<AgentSessions, "lost"> | undefined;
  log: Logger;
}

/** Wires `ns` to the bus and the sessions; returns the sessions' take(). */
export function holdNodes(
  ns: NodeSessions,
  d: HoldingDeps,
): (node: string) => Promise<StoredNode | undefined> {
  const lost = (node: string, by: Record<string, unknown>) => {
    d.log.info("node taken by another hub replica; its connection here is closed", {
      node,
      ...by,
    });
    d.sessions()?.lost(node);
  };
  d.bus.subscribe("taken", (m) => {
    if (ns.release(m.node, m.epoch)) lost(m.node, { replica: m.replica, epoch: m.epoch });
  });
  ns.onLost((node) => lost(node, { seenBy: "a write found a newer epoch" }));
  return async (node) => {
    const claim = await ns.claim(node, d.replica);
    d.bus.publish({ type: "taken", node, replica: d.replica, epoch: claim.epoch });
    return claim.stored;
  };
}
