// @ts-check
// What the dashboard shows of agent updates and agent rollouts (docs/hub-releases.md, "Updating
// one node" and "Rolling a release out to a fleet"): the version each device's agent runs, where
// its update stands, how many devices run each version, and an agent rollout's phase and nodes.
// Pure functions; no DOM.

/** @typedef {import("./model.js").State} State */
/** @typedef {import("./model.js").KObject} KObject */
/**
 * One node's update as GET /api/v1/updates lists it (NodeUpdateView on the hub).
 * @typedef {{ node: string, arch?: string, running?: string, wanted?: string, setAt?: string,
 *   phase?: string, bytes?: number, total?: number, reason?: string, message?: string,
 *   staleVersion?: string, reportedAt?: string, problem?: string }} NodeUpdate
 */
/** @typedef {{ node: string, online: boolean, running?: string, from?: string, wanted?: string, phase?: string, reason?: string }} RolloutNode */
/** @typedef {{ members: number, updated: number, healthy: number, unavailable: number, offline: number }} RolloutCounts */
/**
 * An agent rollout's view (GET /api/v1/agentrollouts lists them).
 * @typedef {{ metadata: { name: string, creationTimestamp?: string },
 *   spec: { version: string, selector?: string, canary?: number | string,
 *     maxUnavailable?: number | string, progressDeadlineSeconds?: number, autoRollback?: boolean },
 *   phase: string, message: string, paused?: boolean,
 *   failed?: { node: string, message: string, rolledBack: boolean },
 *   counts: RolloutCounts, nodes: RolloutNode[] }} AgentRollout
 */

/** Update phases whose device could not take the release. */
const FAILED_PHASES = new Set(["refused", "failed", "rolled-back"]);
/** Update phases of a device taking the release. */
const MOVING_PHASES = new Set(["downloading", "restarting"]);

/**
 * The version `node`'s agent runs: the hub's (its last hello), else the Node's kubeletVersion
 * without "fleetlet/"; undefined when neither is known.
 * @param {KObject} node
 * @param {NodeUpdate | undefined} update
 */
export function runningVersion(node, update) {
  if (update?.running) return update.running;
  const kubelet = String(node.status?.nodeInfo?.kubeletVersion ?? "");
  return kubelet.replace(/^fleetlet\//, "") || undefined;
}

/**
 * The download's progress in whole percent, when the status has one.
 * @param {{ bytes?: number, total?: number }} u
 */
export function progressPercent(u) {
  if (u.bytes === undefined || !u.total) return undefined;
  return Math.min(100, Math.floor((100 * u.bytes) / u.total));
}

/**
 * An update phase as a label with a tone: "downloading 43%", "healthy", "rolled back: crashed".
 * @param {string} phase
 * @param {{ bytes?: number, total?: number, reason?: string }} u
 * @returns {State}
 */
function phaseState(phase, u) {
  const why = u.reason ? `: ${u.reason}` : "";
  switch (phase) {
    case "downloading": {
      const pct = progressPercent(u);
      return { label: `downloading${pct === undefined ? "" : ` ${pct}%`}`, tone: "warn" };
    }
    case "restarting":
      return { label: "restarting", tone: "warn" };
    case "healthy":
    case "done":
      return { label: phase, tone: "ok" };
    case "rolled-back":
      return { label: `rolled back${why}`, tone: "bad" };
    case "refused":
    case "failed":
      return { label: `${phase}${why}`, tone: "bad" };
    default:
      return { label: phase, tone: "none" };
  }
}

/**
 * Where a node's update stands, or undefined when it has none (nothing wanted, nothing
 * reported). `target` is the wanted version when the agent runs another; `title` the agent's
 * sentence. A status of another version than the wanted one reads as `hub update status` prints
 * it: "healthy (0.1.9, stale)". A release the hub cannot offer reads as the hub's problem.
 * @param {NodeUpdate | undefined} u
 * @returns {(State & { target?: string, title?: string }) | undefined}
 */
export function updateState(u) {
  if (u === undefined || (u.wanted === undefined && u.phase === undefined)) return undefined;
  const target = u.wanted !== undefined && u.wanted !== u.running ? u.wanted : undefined;
  const extra = {
    ...(target !== undefined && { target }),
    ...(u.message !== undefined && { title: u.message }),
  };
  if (u.problem !== undefined) return { label: u.problem, tone: "warn", ...extra };
  if (u.phase === undefined) return { label: "pending", tone: "none", ...extra };
  if (u.staleVersion !== undefined)
    return {
      label: `${u.phase.replace("-", " ")} (${u.staleVersion}, stale)`,
      tone: "none",
      ...extra,
    };
  return { ...phaseState(u.phase, u), ...extra };
}

/**
 * The Agent column as one line: "0.1.9 → 0.2.0 downloading 43%", "0.2.0 healthy", "0.1.9".
 * @param {KObject} node
 * @param {NodeUpdate | undefined} u
 */
export function agentText(node, u) {
  const s = updateState(u);
  const version = runningVersion(node, u) ?? "unknown";
  if (s === undefined) return version;
  return `${version}${s.target === undefined ? "" : ` → ${s.target}`} ${s.label}`;
}

/**
 * How many of `nodes` run each agent version, newest version first; nodes whose version is not
 * known yet are counted under "unknown", last.
 * @param {KObject[]} nodes
 * @param {Map<string, NodeUpdate>} updates by node name
 * @returns {{ version: string, nodes: number }[]}
 */
export function versionCounts(nodes, updates) {
  /** @type {Map<string, number>} */
  const counts = new Map();
  for (const n of nodes) {
    const v = runningVersion(n, updates.get(n.metadata.name)) ?? "";
    counts.set(v, (counts.get(v) ?? 0) + 1);
  }
  return [...counts]
    .sort(([a], [b]) =>
      a === "" || b === ""
        ? Number(a === "") - Number(b === "")
        : b.localeCompare(a, "en", { numeric: true }),
    )
    .map(([version, count]) => ({ version: version || "unknown", nodes: count }));
}

/**
 * An agent rollout's phase as a badge.
 * @param {string} phase Canary, Rolling, Complete, Failed, Paused or RolledBack
 * @returns {State}
 */
export function agentRolloutState(phase) {
  if (phase === "Complete") return { label: "Complete", tone: "ok" };
  if (phase === "Failed") return { label: "Failed", tone: "bad" };
  if (phase === "RolledBack") return { label: "Rolled back", tone: "warn" };
  if (phase === "Paused") return { label: "Paused", tone: "none" };
  return { label: phase, tone: "warn" };
}

/**
 * A rollout member's update as a badge: its last status, else "pending" once the rollout wants
 * the release on it, else "waiting" (not moved yet).
 * @param {RolloutNode} n
 * @param {string} version the rollout's release
 * @returns {State}
 */
export function rolloutNodeState(n, version) {
  if (n.phase !== undefined) return phaseState(n.phase, n);
  if (n.wanted === version) return { label: "pending", tone: "none" };
  return { label: "waiting", tone: "none" };
}

/**
 * Members that failed first, then those taking the release, those not there yet, and those done;
 * by name within each.
 * @param {RolloutNode[]} nodes
 */
export function rolloutNodesByAttention(nodes) {
  const rank = (/** @type {RolloutNode} */ n) =>
    FAILED_PHASES.has(n.phase ?? "")
      ? 0
      : MOVING_PHASES.has(n.phase ?? "")
        ? 1
        : n.phase === "healthy" || n.phase === "done"
          ? 3
          : 2;
  return [...nodes].sort((a, b) => rank(a) - rank(b) || a.node.localeCompare(b.node));
}

/**
 * The counts in one line: "5 nodes · 2 updated · 2 healthy · 1 unavailable · 0 offline".
 * @param {RolloutCounts} c
 */
export function countsText(c) {
  return [
    `${c.members} ${c.members === 1 ? "node" : "nodes"}`,
    `${c.updated} updated`,
    `${c.healthy} healthy`,
    `${c.unavailable} unavailable`,
    `${c.offline} offline`,
  ].join(" · ");
}
