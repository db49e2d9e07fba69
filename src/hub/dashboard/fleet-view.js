// @ts-check
// The fleet at a glance: totals, every device with its readiness, connection, pods, restarts and
// agent (its version and update), what needs attention (failing pods, recent warnings), agent
// rollouts (when the hub has them) and how many devices run each agent version.
import { agentCell, rolloutsPanel, versionsPanel } from "./agent-view.js";
import { ago, badge, h, link, table } from "./dom.js";
import {
  ANNOTATION,
  connState,
  fleetSummary,
  formatQuantity,
  newestFirst,
  nodeState,
  podCounts,
  podState,
  pressures,
  restarts,
} from "./model.js";
import { poller } from "./poll.js";
import { clockSkewState } from "./skew.js";

/** Device rows drawn at most (a fleet of thousands is searched with the filter). */
const MAX_ROWS = 500;
/** How often the page asks the hub for agent updates and rollouts while it redraws; for a fleet
 * of more than LARGE_FLEET devices, less often (a rollout over it changes something every second). */
const AGENT_PACE = { everyMs: 3000, soonMs: 0 };
const LARGE_FLEET_AGENT_PACE = { everyMs: 15_000, soonMs: 5000 };
const LARGE_FLEET = 1000;

/** @typedef {import("./live.js").FleetState} FleetState */
/** @typedef {import("./model.js").KObject} KObject */

/**
 * A total with a caption; `tone` colours its edge.
 * @param {string} title
 * @param {string} value
 * @param {string} caption
 * @param {import("./dom.js").Tone} tone
 * @param {string} id
 */
function card(title, value, caption, tone, id) {
  return h(
    "div",
    { cls: `card card-${tone}`, id },
    h("div", { cls: "card-title" }, title),
    h("div", { cls: "card-value" }, value),
    h("div", { cls: "card-caption" }, caption),
  );
}

/** @param {ReturnType<typeof fleetSummary>} s */
function cards(s) {
  const offline = s.nodes - s.online;
  const p = s.pods;
  return h(
    "div",
    { cls: "cards" },
    card(
      "Devices",
      String(s.nodes),
      offline === 0 ? `all ${s.online} online` : `${s.online} online · ${offline} offline`,
      offline > 0 ? "bad" : s.nodes ? "ok" : "none",
      "sum-devices",
    ),
    card(
      "Ready",
      `${s.ready} / ${s.nodes}`,
      [
        s.ready === s.nodes ? "every device ready" : `${s.nodes - s.ready} not ready`,
        ...(s.underPressure > 0 ? [`${s.underPressure} under pressure`] : []),
      ].join(" · "),
      s.ready < s.nodes || s.underPressure > 0 ? "warn" : s.nodes ? "ok" : "none",
      "sum-ready",
    ),
    card(
      "Pods running",
      `${p.running} / ${p.total}`,
      `${p.pending} pending · ${p.failing} failing`,
      p.failing > 0 ? "bad" : p.pending > 0 ? "warn" : p.total ? "ok" : "none",
      "sum-pods",
    ),
    card(
      "Restarts",
      String(p.restarts),
      "all containers, since created",
      p.restarts > 0 ? "warn" : "none",
      "sum-restarts",
    ),
  );
}

/**
 * @param {KObject} n
 * @param {KObject[]} pods
 * @param {import("./agent-model.js").NodeUpdate | undefined} update
 * @param {number} now
 */
function nodeRow(n, pods, update, now) {
  const name = n.metadata.name;
  const ready = nodeState(n);
  const conn = connState(n);
  const skew = clockSkewState(n);
  const c = podCounts(pods);
  const info = n.status?.nodeInfo ?? {};
  const cap = n.status?.capacity ?? {};
  return [
    h("span", { cls: "strong" }, link(["nodes", name], name)),
    [
      badge(ready.label, ready.tone, ready.message),
      ...pressures(n).map((p) => badge(p, "warn")),
      ...(skew?.tone === "warn" ? [badge("ClockSkew", "warn", skew.label)] : []),
    ],
    [
      badge(conn.label, conn.tone),
      conn.tone === "ok"
        ? null
        : h(
            "span",
            { cls: "muted small" },
            " seen ",
            ago(n.metadata.annotations?.[ANNOTATION.lastSeen], now),
          ),
    ],
    [
      h("span", { cls: "num" }, `${c.running}/${c.total}`),
      c.failing ? [" ", badge(`${c.failing} failing`, "bad")] : null,
    ],
    h("span", { cls: c.restarts ? "num warn-text" : "num" }, String(c.restarts)),
    h(
      "span",
      { cls: "muted" },
      [
        info.architecture,
        cap.cpu && formatQuantity("cpu", cap.cpu),
        cap.memory && formatQuantity("memory", cap.memory),
      ]
        .filter(Boolean)
        .join(" · "),
    ),
    agentCell(n, update),
  ];
}

/**
 * @param {FleetState} state
 * @param {string} filter
 */
function matching(state, filter) {
  const f = filter.trim().toLowerCase();
  const nodes = [...state.nodes.values()].sort((a, b) =>
    a.metadata.name.localeCompare(b.metadata.name),
  );
  if (!f) return nodes;
  return nodes.filter((n) => {
    const labels = Object.entries(n.metadata.labels ?? {}).map(([k, v]) => `${k}=${v}`);
    return [n.metadata.name, ...labels].some((s) => s.toLowerCase().includes(f));
  });
}

/**
 * @param {FleetState} state
 * @param {number} now
 */
function attention(state, now) {
  const failing = [...state.pods.values()]
    .map((p) => ({ p, s: podState(p) }))
    .filter(({ s }) => s.tone === "bad")
    .sort(
      (a, b) =>
        a.p._node.localeCompare(b.p._node) || a.p.metadata.name.localeCompare(b.p.metadata.name),
    );
  const warnings = newestFirst(
    [...state.events.values()].filter((e) => e.type === "Warning"),
  ).slice(0, 8);
  return h(
    "div",
    { cls: "grid-2" },
    h(
      "section",
      { cls: "panel" },
      h("h2", null, failing.length ? `Failing pods (${failing.length})` : "Failing pods"),
      table(
        ["Pod", "Device", "Status", "Restarts"],
        failing
          .slice(0, 50)
          .map(({ p, s }) => [
            link(
              ["nodes", p._node, "pods", p.metadata.namespace ?? "default", p.metadata.name],
              p.metadata.name,
            ),
            link(["nodes", p._node], p._node),
            badge(s.label, s.tone),
            h("span", { cls: "num" }, String(restarts(p))),
          ]),
        "No failing pods.",
      ),
      failing.length > 50
        ? h("p", { cls: "muted small" }, `and ${failing.length - 50} more`)
        : null,
    ),
    h(
      "section",
      { cls: "panel" },
      h("h2", null, "Recent warnings"),
      table(
        ["When", "Device", "Object", "Reason"],
        warnings.map((e) => [
          ago(e.lastTimestamp, now),
          link(["nodes", e.source?.host ?? ""], e.source?.host ?? ""),
          e.involvedObject?.name ?? "",
          h("span", { title: e.message }, e.reason),
        ]),
        "No warnings.",
      ),
    ),
  );
}

/** @typedef {import("./agent-model.js").NodeUpdate} NodeUpdate */
/** @typedef {import("./agent-model.js").AgentRollout} AgentRollout */

/**
 * The agents' updates and the agent rollouts, from the hub: asked again at the AGENT_PACE, and
 * sooner when a device's reported update or version changed on the watch.
 * @param {FleetState} state
 * @param {import("./poll.js").Api} api
 * @param {() => void} changed
 */
function agentFeeds(state, api, changed) {
  const pace = () => (state.nodes.size > LARGE_FLEET ? LARGE_FLEET_AGENT_PACE : AGENT_PACE);
  /** @type {import("./poll.js").Poller<{ items: NodeUpdate[] }>} */
  const updates = poller(api, "/api/v1/updates", pace, changed);
  /** @type {import("./poll.js").Poller<{ items: AgentRollout[] }>} */
  const rollouts = poller(api, "/api/v1/agentrollouts", pace, changed);
  let seen = "";
  /** @type {Map<string, NodeUpdate>} */
  let byNode = new Map();
  let from = updates.value;
  return {
    /** @param {number} now */
    refresh(now) {
      let sig = "";
      for (const n of state.nodes.values())
        sig += `${n.metadata.name}\u0000${n.metadata.annotations?.[ANNOTATION.update] ?? ""}\u0000${n.status?.nodeInfo?.kubeletVersion ?? ""}\u0000`;
      updates.refresh(now, sig !== seen);
      rollouts.refresh(now);
      seen = sig;
    },
    /** Each node's update, by name. */
    byNode() {
      if (updates.value !== from) {
        from = updates.value;
        byNode = new Map((from?.items ?? []).map((u) => [u.node, u]));
      }
      return byNode;
    },
    /** The rollouts, or undefined when the hub has no such API or has not answered yet. */
    rollouts() {
      return rollouts.absent ? undefined : rollouts.value?.items;
    },
  };
}

/**
 * The device table (its first MAX_ROWS rows) and a note when there are more.
 * @param {FleetState} state
 * @param {KObject[]} nodes those that match the filter
 * @param {Map<string, NodeUpdate>} updates by node
 * @param {number} now
 */
function devices(state, nodes, updates, now) {
  const empty =
    state.nodes.size === 0
      ? "No device has joined yet. Create a join token with `fleetlet hub token create` and start an agent with --hub and --join-token."
      : "No device matches the filter.";
  return [
    table(
      ["Device", "Status", "Connection", "Pods", "Restarts", "Hardware", "Agent"],
      nodes
        .slice(0, MAX_ROWS)
        .map((n) => nodeRow(n, state.podsOf(n.metadata.name), updates.get(n.metadata.name), now)),
      empty,
      "devices",
    ),
    nodes.length > MAX_ROWS
      ? h(
          "p",
          { cls: "muted small" },
          `Showing ${MAX_ROWS} of ${nodes.length} devices; filter to narrow.`,
        )
      : "",
  ];
}

/**
 * Mounts the fleet page in `root`; `update` redraws what changed. Agent updates and rollouts
 * are read with `api`.
 * @param {HTMLElement} root
 * @param {FleetState} state
 * @param {import("./poll.js").Api} api
 */
export function mountFleet(root, state, api) {
  const summary = h("div");
  const filter = h("input", {
    type: "search",
    id: "filter",
    attrs: { placeholder: "Filter devices by name or label", "aria-label": "Filter devices" },
  });
  const list = h("div");
  const rollouts = h("div");
  const more = h("div");
  const versions = h("div");
  root.replaceChildren(
    h("div", { cls: "page-head" }, h("h1", null, "Fleet"), link(["daemonsets"], "DaemonSets →")),
    summary,
    h(
      "section",
      { cls: "panel" },
      h("div", { cls: "panel-head" }, h("h2", null, "Devices"), filter),
      list,
    ),
    rollouts,
    more,
    versions,
  );
  const agents = agentFeeds(state, api, () => update());
  const update = (now = Date.now()) => {
    agents.refresh(now);
    const all = [...state.nodes.values()];
    summary.replaceChildren(cards(fleetSummary(all, [...state.pods.values()])));
    const updates = agents.byNode();
    list.replaceChildren(...devices(state, matching(state, filter.value), updates, now));
    const r = agents.rollouts();
    rollouts.hidden = r === undefined;
    rollouts.replaceChildren(r === undefined ? "" : rolloutsPanel(r, now));
    more.replaceChildren(attention(state, now));
    versions.hidden = all.length === 0;
    versions.replaceChildren(all.length ? versionsPanel(all, updates) : "");
  };
  filter.addEventListener("input", () => update());
  return { update, title: "Fleet" };
}
