// `fleetlet hub` as one of several replicas (docs/hub-replicas.md): the options only replicas
// use, and what the hub starts with them: following the shared change log, taking a node before
// welcoming its agent, serving the streams of the nodes held here to the other replicas, and this
// replica's beat in the store. A single hub has none of them.
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import { type Bus, createLocalBus } from "./bus.ts";
import { startDeadHolders } from "./dead-holders.ts";
import type { Deployer } from "./deploy/deployer.ts";
import { type ChangeLogOptions, startFollower } from "./follow.ts";
import type { UpdateFollowing } from "./follow-updates.ts";
import { holdNodes } from "./holding.ts";
import type { ReplicaStreams } from "./relay/replica.ts";
import type { AgentSessions, SessionOptions } from "./sessions.ts";
import type { HubState } from "./state.ts";
import type { StreamBroker } from "./streams/broker.ts";

export interface ReplicaOptions {
  /** The bus between replicas (bus-nats.ts), closed by stop(); absent: the in-process one. */
  bus?: Bus;
  /** Replicas: how the shared change log is followed and trimmed (follow.ts). */
  changeLog?: ChangeLogOptions;
  /** Streams to devices held by other replicas, on the bus's NATS connection (relay/replica.ts);
   * closed by stop(). Absent: a stream reaches only a device connected here. */
  relay?: ReplicaStreams;
  /** This replica's name in node_sessions (--replica-id; default "hub"). */
  replicaId?: string;
  /** Replicas: time between a replica's beats in the store and the leader's passes releasing
   * the nodes of replicas whose beat stopped (dead-holders.ts; default 5 s, at most a third of
   * the offline threshold). */
  replicaBeatIntervalMs?: number;
}

interface Wiring extends ReplicaOptions {
  clock: Clock;
  log: Logger;
}

/** Follows the shared change log into this replica's view (follow.ts). */
export function followChanges(
  opts: Wiring,
  state: HubState,
  deployer: Deployer,
  parts: { updates: UpdateFollowing; sessions: { revoked(node: string): void } },
) {
  return startFollower({
    state,
    deployer,
    ...parts,
    bus: opts.bus ?? createLocalBus(),
    clock: opts.clock,
    log: opts.log,
    ...(opts.changeLog !== undefined && { options: opts.changeLog }),
  });
}

/** Replicas: this replica's beat in the store, and the leader's release of dead replicas'
 * nodes (dead-holders.ts), at least three beats within the offline threshold; none for a single
 * hub. */
export function beatReplica(opts: Wiring, { beats, leadership, offlineAfterMs }: HubState) {
  if (beats === undefined) return undefined;
  const { clock, log, replicaId: replica = "hub", replicaBeatIntervalMs: every = 5000 } = opts;
  const o = { beats, leadership, replica, clock, log: log.with({ component: "replicas" }) };
  const intervalMs = Math.min(every, offlineAfterMs / 3);
  return startDeadHolders({ ...o, intervalMs, thresholdMs: offlineAfterMs });
}

/** How this hub replica takes a node before welcoming its agent (holding.ts); undefined for a
 * single hub, which holds every node. */
export function nodeTaking(
  opts: Wiring,
  state: HubState,
  sessions: () => AgentSessions | undefined,
): SessionOptions["take"] {
  if (state.nodeSessions === undefined) return undefined;
  return holdNodes(state.nodeSessions, {
    bus: opts.bus ?? createLocalBus(),
    replica: opts.replicaId ?? "hub",
    sessions,
    log: opts.log,
  });
}

/** Serves the streams of the nodes whose agents are connected here to the other replicas, and
 * their health history (`health`) to the others' GET /api/v1/nodes/NAME/health. */
export function holdingOf(
  relay: ReplicaStreams,
  broker: StreamBroker,
  health: (node: string) => unknown,
) {
  return (node: string, here: boolean) =>
    here ? relay.hold(node, broker.opener(node), () => health(node)) : relay.release(node);
}
