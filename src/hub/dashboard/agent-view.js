// @ts-check
// Agent updates on the page: the Agent cell of a device row, the Agent versions panel, a device's
// Agent section, and the Agent rollouts panel (docs/hub-releases.md). The data comes from
// GET /api/v1/updates, /api/v1/nodes/NAME/update and /api/v1/agentrollouts (see poll.js).

import {
  agentRolloutState,
  countsText,
  progressPercent,
  rolloutNodeState,
  rolloutNodesByAttention,
  runningVersion,
  updateState,
  versionCounts,
} from "./agent-model.js";
import { ago, badge, code, facts, h, link, table } from "./dom.js";
import { bytes } from "./model.js";

/** @typedef {import("./agent-model.js").NodeUpdate} NodeUpdate */
/** @typedef {import("./agent-model.js").AgentRollout} AgentRollout */
/** @typedef {import("./model.js").KObject} KObject */

/** Member rows drawn at most per rollout. */
const MAX_ROWS = 500;

/**
 * The Agent cell of a device row: "0.1.9 → 0.2.0" and a badge for where its update stands.
 * @param {KObject} node
 * @param {NodeUpdate | undefined} u
 */
export function agentCell(node, u) {
  const s = updateState(u);
  const version = runningVersion(node, u);
  return h(
    "span",
    { cls: "agent" },
    h("span", { cls: version ? "num" : "muted" }, version ?? "—"),
    s?.target === undefined ? null : h("span", { cls: "num" }, ` → ${s.target}`),
    s === undefined ? null : [" ", badge(s.label, s.tone, s.title)],
  );
}

/**
 * How many devices run each agent version.
 * @param {KObject[]} nodes
 * @param {Map<string, NodeUpdate>} updates by node
 */
export function versionsPanel(nodes, updates) {
  const rows = versionCounts(nodes, updates);
  return h(
    "section",
    { cls: "panel", id: "agent-versions" },
    h("h2", null, "Agent versions"),
    table(
      ["Version", "Devices", "Share"],
      rows.map((r) => {
        const pct = Math.round((100 * r.nodes) / nodes.length);
        return [
          h("span", { cls: r.version === "unknown" ? "muted" : "strong num" }, r.version),
          h("span", { cls: "num" }, String(r.nodes)),
          h(
            "span",
            { cls: "share" },
            h("progress", { attrs: { max: String(nodes.length), value: String(r.nodes) } }),
            h("span", { cls: "num muted" }, `${pct} %`),
          ),
        ];
      }),
      "No device has joined yet.",
      "agent-versions",
    ),
  );
}

/**
 * A device's Agent section; `u` undefined while it loads.
 * @param {KObject} node
 * @param {NodeUpdate | undefined} u
 * @param {string | undefined} error
 * @param {number} now
 */
export function agentSection(node, u, error, now) {
  const s = updateState(u);
  const pct = u === undefined ? undefined : progressPercent(u);
  const progress =
    u === undefined || pct === undefined || u.staleVersion !== undefined
      ? ""
      : [
          h("progress", { attrs: { max: "100", value: String(pct) } }),
          ` ${pct} % (${bytes(u.bytes ?? 0)} of ${bytes(u.total ?? 0)})`,
        ];
  return h(
    "section",
    { cls: "panel", id: "agent" },
    h("h2", null, "Agent"),
    error && u === undefined ? h("p", { cls: "error" }, `Cannot read its update: ${error}`) : null,
    facts([
      ["Version", runningVersion(node, u) ?? "unknown"],
      ["Architecture", u?.arch ?? node.status?.nodeInfo?.architecture],
      ["Wanted", u?.wanted && [u.wanted, " · set ", ago(u.setAt, now)]],
      ["Phase", s && badge(s.label, s.tone)],
      ["Progress", progress],
      ["Reason", u?.problem ?? u?.reason],
      ["Message", u?.message && h("span", { cls: "message" }, u.message)],
      ["Reported", u?.reportedAt && ago(u.reportedAt, now)],
    ]),
    u !== undefined && s === undefined
      ? h("p", { cls: "muted small" }, "No update wanted or reported.")
      : null,
  );
}

/**
 * One rollout: its phase, message, counts, why it stopped, and its nodes.
 * @param {AgentRollout} r
 * @param {number} now
 */
function rolloutArticle(r, now) {
  const st = agentRolloutState(r.phase);
  const nodes = rolloutNodesByAttention(r.nodes);
  return h(
    "article",
    { cls: "rollout", attrs: { "data-rollout": r.metadata.name } },
    h(
      "header",
      null,
      h("h3", null, r.metadata.name),
      badge(st.label, st.tone),
      r.paused && r.phase !== "Paused" ? badge("Paused", "none") : null,
      h(
        "span",
        { cls: "muted" },
        "to ",
        h("span", { cls: "strong num" }, r.spec.version),
        " · ",
        r.spec.selector ? code(r.spec.selector) : "every node",
        " · created ",
        ago(r.metadata.creationTimestamp, now),
      ),
    ),
    h("p", { cls: "rollout-message" }, r.message),
    r.failed
      ? h(
          "p",
          { cls: "rollout-failed" },
          "Stopped at ",
          link(["nodes", r.failed.node], r.failed.node),
          `: ${r.failed.message}`,
          r.failed.rolledBack ? " (the nodes it moved are sent their previous version)" : "",
        )
      : null,
    h("p", { cls: "rollout-counts muted" }, countsText(r.counts)),
    table(
      ["Node", "Connection", "Running", "From", "Wanted", "Update"],
      nodes.slice(0, MAX_ROWS).map((n) => {
        const ns = rolloutNodeState(n, r.spec.version);
        return [
          link(["nodes", n.node], n.node),
          badge(n.online ? "Online" : "Offline", n.online ? "ok" : "bad"),
          h("span", { cls: "num" }, n.running ?? "—"),
          h("span", { cls: "num muted" }, n.from ?? "—"),
          h("span", { cls: "num" }, n.wanted ?? "—"),
          badge(ns.label, ns.tone),
        ];
      }),
      "No node matches its selector.",
      "rollout-nodes",
    ),
    nodes.length > MAX_ROWS
      ? h("p", { cls: "muted small" }, `Showing ${MAX_ROWS} of ${nodes.length} nodes.`)
      : null,
  );
}

/**
 * The Agent rollouts panel.
 * @param {AgentRollout[]} rollouts
 * @param {number} now
 */
export function rolloutsPanel(rollouts, now) {
  const sorted = [...rollouts].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  return h(
    "section",
    { cls: "panel", id: "agent-rollouts" },
    h("h2", null, rollouts.length ? `Agent rollouts (${rollouts.length})` : "Agent rollouts"),
    sorted.length === 0
      ? h("p", { cls: "empty" }, "No agent rollout.")
      : h(
          "div",
          { cls: "stack" },
          sorted.map((r) => rolloutArticle(r, now)),
        ),
  );
}
