// The message-routing part of an agent connection on the hub: what each message of a connected
// node does (after the connection part checked who it is and decoded it): heartbeats are
// answered (and their clock gives the node's clock skew), desired.ack updates the node's desired report, health is kept in the node's health history, update.status goes to the node's
// updates, sequenced messages go to the fleet
// and are queued for storing and acknowledging. Returns why the connection must close, if it
// must.
import type { AgentMessage, ErrorCode, UpdateStatus } from "../protocol/index.ts";
import { isSequenced } from "../protocol/index.ts";
import type { Fleet } from "./fleet.ts";

export interface Refusal {
  code: ErrorCode;
  reason: string;
}

export interface AgentRouteDeps {
  fleet: Pick<Fleet, "touch" | "setDesiredAck" | "ingest" | "setClockSkew" | "health">;
  /** The node sent messages to store and acknowledge. */
  markDirty(node: string): void;
  /** The agent of `node` reported on its desired state. */
  onDesiredAck?(node: string): void;
  /** The agent of `node` reported on an update (updates/updates.ts). */
  onUpdateStatus?(node: string, status: UpdateStatus): void;
  /** The agent sent its whole Node (stored in the fleet), which may bring its arch. */
  onNodeReport?(): void;
}

/** The device's clock minus the hub's when it sent a message carrying `agentClock`, received at
 * `now` (docs/protocol.md, "Clock skew"): the message left half a round trip before `now`. */
export function clockSkew(agentClock: number, now: number, rttMs = 0): number {
  return agentClock - (now - rttMs / 2);
}

/** Applies message `msg` of node `name`, received at `now`; `reply` answers on its connection. */
export function routeAgentMessage(
  name: string,
  msg: AgentMessage,
  now: number,
  reply: (text: string) => void,
  deps: AgentRouteDeps,
): Refusal | undefined {
  deps.fleet.touch(name, now);
  if (msg.type === "hello") return { code: "protocol", reason: "hello was already received" };
  if (msg.type === "hb") {
    reply('{"type":"hb"}');
    if (msg.clock !== undefined)
      deps.fleet.setClockSkew(name, clockSkew(msg.clock, now, msg.rttMs));
  } else if (msg.type === "health") {
    deps.fleet.health.add(name, msg.health);
  } else if (msg.type === "desired.ack") {
    deps.fleet.setDesiredAck(name, msg);
    deps.onDesiredAck?.(name);
  } else if (msg.type === "update.status") {
    deps.onUpdateStatus?.(name, msg);
  } else if (isSequenced(msg)) {
    const result = deps.fleet.ingest(name, msg);
    if (!result.ok) return { code: "forbidden", reason: result.reason };
    deps.markDirty(name);
    if (msg.type === "node") deps.onNodeReport?.();
  }
  return undefined;
}
