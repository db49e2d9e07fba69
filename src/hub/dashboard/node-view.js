// @ts-check
// One device: its readiness and connection, conditions, capacity, system facts, its agent and
// where its update stands, pods and events.
import { agentSection } from "./agent-view.js";
import { ago, badge, chips, code, facts, h, link, panel, table } from "./dom.js";
import { healthPanel } from "./health-view.js";
import {
  ANNOTATION,
  connState,
  foldRepeats,
  formatQuantity,
  imageRows,
  newestFirst,
  nodeState,
  podState,
  pressures,
  ready,
  restarts,
} from "./model.js";
import { poller } from "./poll.js";
import { clockSkewState } from "./skew.js";

/** @typedef {import("./live.js").FleetState} FleetState */
/** @typedef {import("./model.js").KObject} KObject */
/** @typedef {import("./model.js").KEvent} KEvent */

const RESOURCES = ["cpu", "memory", "ephemeral-storage", "pods"];

/** @param {string} status @param {string} type */
function conditionTone(type, status) {
  const good = type === "Ready" ? "True" : "False";
  if (status === good) return "ok";
  return status === "Unknown" ? "warn" : "bad";
}

/**
 * @param {KObject} n
 * @param {number} now
 */
function conditions(n, now) {
  const cs = /** @type {any[]} */ (n.status?.conditions ?? []);
  return panel(
    "Conditions",
    table(
      ["Type", "Status", "Reason", "Message", "Changed"],
      cs.map((c) => [
        h("span", { cls: "strong" }, c.type),
        badge(c.status, conditionTone(c.type, c.status)),
        c.reason ?? "",
        h("span", { cls: "muted" }, c.message ?? ""),
        ago(c.lastTransitionTime, now),
      ]),
      "The device has not reported conditions yet.",
    ),
  );
}

/** @param {KObject} n */
function capacity(n) {
  const cap = n.status?.capacity ?? {};
  const alloc = n.status?.allocatable ?? {};
  const names = [...new Set([...RESOURCES, ...Object.keys(cap)])].filter(
    (r) => cap[r] !== undefined || alloc[r] !== undefined,
  );
  return panel(
    "Capacity",
    table(
      ["Resource", "Capacity", "Allocatable"],
      names.map((r) => [
        h("span", { cls: "strong" }, r),
        formatQuantity(r, cap[r]),
        formatQuantity(r, alloc[r]),
      ]),
      "No capacity reported yet.",
    ),
  );
}

/** @param {KObject} n */
function system(n) {
  const i = n.status?.nodeInfo ?? {};
  const addresses = /** @type {any[]} */ (n.status?.addresses ?? [])
    .map((a) => `${a.address} (${a.type})`)
    .join(", ");
  return panel(
    "System",
    facts([
      ["OS", i.osImage],
      ["Kernel", i.kernelVersion],
      ["Architecture", i.architecture],
      ["Runtime", i.containerRuntimeVersion],
      ["Agent", i.kubeletVersion],
      ["Addresses", addresses],
      ["Machine ID", i.machineID && code(i.machineID)],
      ["Boot ID", i.bootID && code(i.bootID)],
    ]),
    chips(n.metadata.labels),
  );
}

/** @param {KObject} n */
function images(n) {
  const rows = imageRows(n);
  return panel(
    `Images (${rows.length})`,
    table(
      ["Image", "Size"],
      rows.map((r) => [code(r.name), h("span", { cls: "num" }, r.size)]),
      "The device has not reported its images yet.",
    ),
  );
}

/**
 * @param {string} node
 * @param {KObject[]} pods
 * @param {number} now
 */
function podTable(node, pods, now) {
  const sorted = [...pods].sort((a, b) =>
    `${a.metadata.namespace}/${a.metadata.name}`.localeCompare(
      `${b.metadata.namespace}/${b.metadata.name}`,
    ),
  );
  return panel(
    `Pods (${pods.length})`,
    table(
      ["Pod", "Namespace", "Ready", "Status", "Restarts", "IP", "Age"],
      sorted.map((p) => {
        const s = podState(p);
        const r = ready(p);
        const ns = p.metadata.namespace ?? "default";
        return [
          h(
            "span",
            { cls: "strong" },
            link(["nodes", node, "pods", ns, p.metadata.name], p.metadata.name),
          ),
          h("span", { cls: "muted" }, ns),
          h(
            "span",
            { cls: r.ready === r.total ? "num" : "num warn-text" },
            `${r.ready}/${r.total}`,
          ),
          badge(s.label, s.tone),
          h("span", { cls: "num" }, String(restarts(p))),
          p.status?.podIP ? code(p.status.podIP) : "—",
          ago(p.status?.startTime ?? p.metadata.creationTimestamp, now, ""),
        ];
      }),
      "No pods on this device.",
      "pods",
    ),
  );
}

/**
 * Events as a table, newest first.
 * @param {KEvent[]} events
 * @param {number} now
 * @param {boolean} withObject
 */
export function eventTable(events, now, withObject) {
  const head = [
    "Last seen",
    "Type",
    "Reason",
    ...(withObject ? ["Object"] : []),
    "Message",
    "Count",
  ];
  return table(
    head,
    newestFirst(foldRepeats(events))
      .slice(0, 50)
      .map((e) => [
        ago(e.lastTimestamp, now),
        badge(e.type, e.type === "Warning" ? "warn" : "none"),
        h("span", { cls: "strong" }, e.reason),
        ...(withObject
          ? [`${(e.involvedObject?.kind ?? "").toLowerCase()}/${e.involvedObject?.name ?? ""}`]
          : []),
        h("span", { cls: "message" }, e.message),
        h("span", { cls: "num" }, String(e.count ?? 1)),
      ]),
    "No events.",
    "events",
  );
}

/** How often the page asks the hub for the device's health (ms). */
const HEALTH_REFRESH_MS = 15_000;
/** How often the page asks the hub for the device's update while it redraws; at once when the
 * Node shows a new update status. */
const UPDATE_PACE = { everyMs: 3000, soonMs: 0 };

/**
 * The device's health from the hub, asked again at most every HEALTH_REFRESH_MS.
 * @param {string} name
 * @param {(path: string) => Promise<any>} api
 * @param {() => void} changed
 */
function healthFetcher(name, api, changed) {
  let fetchedAt = 0;
  const out = {
    /** @type {import("./health-view.js").HealthView | undefined} */
    view: undefined,
    /** @param {number} now */
    refresh(now) {
      if (now - fetchedAt < HEALTH_REFRESH_MS) return;
      fetchedAt = now;
      api(`/api/v1/nodes/${encodeURIComponent(name)}/health`)
        .then((v) => {
          out.view = v;
          changed();
        })
        .catch(() => {});
    },
  };
  return out;
}

/**
 * The page's head: the device's name, badges and when it was last seen.
 * @param {KObject} n
 * @param {number} now
 */
function head(n, now) {
  const st = nodeState(n);
  const conn = connState(n);
  const skew = clockSkewState(n);
  return h(
    "div",
    { cls: "page-head" },
    h("h1", null, n.metadata.name),
    h(
      "div",
      { cls: "head-badges" },
      badge(st.label, st.tone, st.message),
      badge(conn.label, conn.tone),
      ...pressures(n).map((p) => badge(p, "warn")),
      ...(skew?.tone === "warn" ? [badge("ClockSkew", "warn", skew.label)] : []),
    ),
    h(
      "p",
      { cls: "muted" },
      "Last seen ",
      ago(n.metadata.annotations?.[ANNOTATION.lastSeen], now),
      " · joined ",
      ago(n.metadata.creationTimestamp, now),
      skew ? " · " : "",
      skew ? h("span", { cls: skew.tone === "warn" ? "warn-text" : "" }, skew.label) : "",
      st.tone !== "ok" && st.message ? ` · ${st.message}` : "",
    ),
  );
}

/**
 * Mounts the page of device `name` in `root`; its health comes from `api` (not the watch).
 * @param {HTMLElement} root
 * @param {FleetState} state
 * @param {string} name
 * @param {(path: string) => Promise<any>} api
 */
export function mountNode(root, state, name, api) {
  const health = healthFetcher(name, api, () => update());
  /** @type {import("./poll.js").Poller<import("./agent-model.js").NodeUpdate>} */
  const agent = poller(
    api,
    `/api/v1/nodes/${encodeURIComponent(name)}/update`,
    () => UPDATE_PACE,
    () => update(),
  );
  let agentSeen = "";
  const update = (now = Date.now()) => {
    health.refresh(now);
    const n = state.nodes.get(name);
    if (n) {
      const sig = `${n.metadata.annotations?.[ANNOTATION.update]}/${n.status?.nodeInfo?.kubeletVersion}`;
      agent.refresh(now, sig !== agentSeen);
      agentSeen = sig;
    }
    const crumbs = h(
      "nav",
      { cls: "crumbs", attrs: { "aria-label": "breadcrumb" } },
      link([""], "Fleet"),
      " / ",
      name,
    );
    if (!n) {
      root.replaceChildren(crumbs, h("p", { cls: "notice" }, `No device named "${name}" (yet).`));
      return;
    }
    root.replaceChildren(
      crumbs,
      head(n, now),
      podTable(name, state.podsOf(name), now),
      conditions(n, now),
      healthPanel(health.view),
      h("div", { cls: "grid-2" }, capacity(n), system(n)),
      h("div", { cls: "grid-2" }, agentSection(n, agent.value, agent.error, now), images(n)),
      panel("Events", eventTable(state.eventsOf(name), now, true)),
    );
  };
  return { update, title: name };
}
