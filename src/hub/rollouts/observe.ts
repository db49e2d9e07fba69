// What an agent rollout sees of its members, for the planner and the view (docs/hub-releases.md,
// "The planner's revisions"): the two revisions are the release (`version`) and PREVIOUS, each
// member's version before the rollout moved it. Pure.
import { scaledValue } from "../../api/daemonset.ts";
import type { UpdateStatus } from "../../protocol/index.ts";
import type { DeviceFacts, PodFacts, RolloutPhase, RolloutSettings } from "../deploy/plan.ts";
import { rfc3339 } from "../views.ts";
import { type AgentRollout, type AgentRolloutSpec, PREVIOUS } from "./spec.ts";

/** What the hub knows of one member now. */
export interface MemberObservation {
  name: string;
  online: boolean;
  /** The version its agent runs, as last known. */
  running?: string;
  /** Its wanted release. */
  wanted?: string;
  /** Its agent's last update.status. */
  status?: UpdateStatus;
  /** When its agent was first offered the rollout's version. */
  offeredAt?: number;
}

export type AgentRolloutPhase = RolloutPhase | "Paused" | "RolledBack";

/** Why a member fails the rollout of `version`, from its agent's last status. */
function failureOf(s: UpdateStatus | undefined, version: string): string | undefined {
  if (s === undefined || s.version !== version) return undefined;
  const why = `${s.reason === undefined ? "" : ` (${s.reason})`}${s.message === undefined ? "" : `: ${s.message}`}`;
  if (s.phase === "refused") return `its agent refused ${version}${why}`;
  if (s.phase === "rolled-back") return `its agent was rolled back from ${version}${why}`;
  return undefined;
}

/** Whether the rollout moved `node` (it has a `from`). */
export function moved(r: AgentRollout, node: string): boolean {
  return Object.hasOwn(r.record.from, node);
}

/**
 * Whether the member's agent runs `version`, healthy: its last status of `version` is `healthy`
 * (a new agent on trial says hello with its version before it is healthy: the status the old
 * agent sent, `restarting`, stands until then), or it says it runs `version` and reported
 * nothing of it.
 */
function runs(m: MemberObservation, version: string): boolean {
  if (m.status?.version === version) return m.status.phase === "healthy";
  return m.running === version;
}

/**
 * Whether the member counts as online for the planner: it is connected, or it went away after it
 * was offered the rollout's version and does not run it yet. An agent taking an update restarts,
 * so the member it takes the update on is not skipped as an offline device would be: it counts
 * as unavailable until it is back on the version (or fails), and holds the canary and
 * `maxUnavailable` meanwhile.
 */
function counted(m: MemberObservation, assigned: string, version: string, on: boolean): boolean {
  return m.online || (assigned === version && m.offeredAt !== undefined && !on);
}

/** Why a counted member offered `version` at `offeredAt` fails the progress deadline, if it does. */
function lateness(
  r: AgentRollout,
  m: MemberObservation,
  online: boolean,
  now: number,
): string | undefined {
  const deadline = r.spec.progressDeadlineSeconds;
  if (!online || m.offeredAt === undefined || now - m.offeredAt <= deadline * 1000)
    return undefined;
  return `its agent did not report ${r.spec.version} healthy within the progress deadline (${deadline}s)`;
}

/** The planner's facts of member `m` at `now`: assigned `version` when the rollout moved it
 * there. */
export function deviceFacts(r: AgentRollout, m: MemberObservation, now: number): DeviceFacts {
  const { version } = r.spec;
  const assigned = moved(r, m.name) && m.wanted === version ? version : PREVIOUS;
  const on = runs(m, version);
  const online = counted(m, assigned, version, on);
  const failure =
    failureOf(m.status, version) ??
    (assigned === version && !on ? lateness(r, m, online, now) : undefined);
  const from = r.record.from[m.name];
  const back = from === undefined || from === null ? !runs(m, version) : m.running === from;
  const pods = new Map<string, PodFacts>([
    [version, { ready: on, available: on, ...(failure !== undefined && { failure }) }],
    [PREVIOUS, { ready: back, available: back }],
  ]);
  return {
    name: m.name,
    eligible: true,
    online,
    assigned,
    ...(assigned === version && m.offeredAt !== undefined && { deliveredAt: m.offeredAt }),
    pods,
  };
}

/** The planner's settings, with counts and percents resolved against the members. */
export function settingsOf(spec: AgentRolloutSpec, facts: readonly DeviceFacts[]): RolloutSettings {
  return {
    maxUnavailable: Math.max(1, scaledValue(spec.maxUnavailable, facts.length)),
    canary: scaledValue(spec.canary, facts.filter((d) => d.online).length),
    progressDeadlineMs: spec.progressDeadlineSeconds * 1000,
    autoRollback: spec.autoRollback,
  };
}

interface AgentRolloutCounts {
  members: number;
  /** Members sent the version. */
  updated: number;
  /** Members running it. */
  healthy: number;
  /** Online members not running the version they were sent (or their previous one). */
  unavailable: number;
  offline: number;
}

interface NodeView {
  node: string;
  online: boolean;
  running?: string;
  from?: string;
  wanted?: string;
  phase?: string;
  reason?: string;
}

export interface AgentRolloutView {
  apiVersion: "fleetlet.io/v1";
  kind: "AgentRollout";
  metadata: { name: string; creationTimestamp: string };
  spec: AgentRolloutSpec;
  phase: AgentRolloutPhase;
  message: string;
  paused: boolean;
  failed?: { node: string; message: string; rolledBack: boolean };
  counts: AgentRolloutCounts;
  nodes: NodeView[];
}

function countsOf(r: AgentRollout, members: readonly MemberObservation[]): AgentRolloutCounts {
  const facts = members.map((m) => deviceFacts(r, m, 0));
  const available = (d: DeviceFacts) => d.pods.get(d.assigned ?? "")?.available === true;
  return {
    members: members.length,
    updated: facts.filter((d) => d.assigned === r.spec.version).length,
    healthy: members.filter((m) => runs(m, r.spec.version)).length,
    unavailable: facts.filter((d) => d.online && !available(d)).length,
    offline: facts.filter((d) => !d.online).length,
  };
}

function nodeView(r: AgentRollout, m: MemberObservation): NodeView {
  const from = r.record.from[m.name];
  const s = m.status?.version === m.wanted ? m.status : undefined;
  const phase = s?.phase ?? (m.wanted !== undefined && m.running === m.wanted ? "done" : undefined);
  return {
    node: m.name,
    online: m.online,
    ...(m.running !== undefined && { running: m.running }),
    ...(from !== undefined && from !== null && { from }),
    ...(m.wanted !== undefined && { wanted: m.wanted }),
    ...(phase !== undefined && { phase }),
    ...(s?.reason !== undefined && { reason: s.reason }),
  };
}

/** kubectl's wording of where the rollout stands. */
function messageOf(r: AgentRollout, phase: AgentRolloutPhase, c: AgentRolloutCounts): string {
  const { version } = r.spec;
  const target = c.members - c.offline;
  const tail = c.offline === 0 ? "" : `; ${c.offline} offline node(s) will be updated when back`;
  const f = r.record.planner.failed;
  switch (phase) {
    case "Failed":
      return `rollout of ${version} stopped on node ${f?.device ?? "?"}: ${f?.message ?? "failed"}${
        f?.rolledBack === true
          ? "; the nodes that got it were sent their previous version again"
          : "; automatic rollback is off"
      }`;
    case "RolledBack":
      return `undone: the nodes it moved were sent their previous version again`;
    case "Paused":
      return `paused: ${c.updated} out of ${target} nodes have been updated${tail}`;
    case "Complete":
      return `${version} runs on all ${target} online nodes${tail}`;
    case "Canary":
      return `canary: ${c.healthy} of ${c.updated} updated nodes are healthy${tail}`;
    case "Rolling":
      return c.updated < target
        ? `${c.updated} out of ${target} nodes have been updated${tail}`
        : `${c.healthy} of ${c.updated} updated nodes are healthy${tail}`;
  }
}

/** The view of rollout `r` (GET /api/v1/agentrollouts/NAME). */
export function rolloutView(
  r: AgentRollout,
  members: readonly MemberObservation[],
  phase: AgentRolloutPhase,
): AgentRolloutView {
  const counts = countsOf(r, members);
  const f = r.record.planner.failed;
  return {
    apiVersion: "fleetlet.io/v1",
    kind: "AgentRollout",
    metadata: { name: r.name, creationTimestamp: rfc3339(r.created) },
    spec: r.spec,
    phase,
    message: messageOf(r, phase, counts),
    paused: r.record.paused,
    ...(f !== undefined &&
      f.hash === r.spec.version && {
        failed: { node: f.device, message: f.message, rolledBack: f.rolledBack },
      }),
    counts,
    nodes: members.map((m) => nodeView(r, m)),
  };
}
