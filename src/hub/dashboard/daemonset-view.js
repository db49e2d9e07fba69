// @ts-check
// DaemonSets and their rollouts: the list (#/daemonsets) and one DaemonSet (#/daemonsets/NS/NAME)
// with its revisions, which device is on which, and why a rollout stopped. Read from the hub's
// API, again on every redraw (at most every REFRESH_MS) and every REFRESH_MS while shown.
import { badge, facts, h, link, panel, table } from "./dom.js";
import {
  deviceRolloutState,
  devicesByAttention,
  revisionRows,
  rolloutState,
  updatedOf,
} from "./rollout-model.js";

/** @typedef {(path: string) => Promise<any>} Api */
/** @typedef {import("./rollout-model.js").RolloutView} RolloutView */

const REFRESH_MS = 2000;
/** Device rows drawn at most. */
const MAX_ROWS = 500;

/**
 * Calls `load` now and then at most every REFRESH_MS, and every REFRESH_MS while `el` is shown.
 * @param {HTMLElement} el
 * @param {() => Promise<void>} load
 */
function refresher(el, load) {
  let last = 0;
  let busy = false;
  const run = async () => {
    if (busy || Date.now() - last < REFRESH_MS / 2) return;
    busy = true;
    last = Date.now();
    try {
      await load();
    } catch (err) {
      el.replaceChildren(
        h("p", { cls: "error" }, `Cannot read from the hub: ${/** @type {Error} */ (err).message}`),
      );
    } finally {
      busy = false;
    }
  };
  const timer = setInterval(() => {
    if (!el.isConnected) clearInterval(timer);
    else void run();
  }, REFRESH_MS);
  return run;
}

/**
 * The DaemonSet list.
 * @param {HTMLElement} root
 * @param {Api} api
 */
export function mountDaemonSets(root, api) {
  const body = h("div", { id: "daemonsets" }, h("p", { cls: "muted" }, "Loading…"));
  root.replaceChildren(
    h("div", { cls: "page-head" }, h("h1", null, "DaemonSets"), link([], "← Fleet")),
    h("section", { cls: "panel" }, body),
  );
  const load = async () => {
    const list = await api("/apis/apps/v1/daemonsets");
    const rows = await Promise.all(
      /** @type {any[]} */ (list.items).map(async (ds) => {
        const ns = ds.metadata.namespace ?? "default";
        /** @type {RolloutView} */
        const view = await api(
          `/apis/apps/v1/namespaces/${encodeURIComponent(ns)}/daemonsets/${encodeURIComponent(ds.metadata.name)}/rollout`,
        );
        const st = rolloutState(view.phase);
        return [
          h(
            "span",
            { cls: "strong" },
            link(["daemonsets", ns, ds.metadata.name], ds.metadata.name),
          ),
          ns,
          h(
            "span",
            { cls: "num" },
            `${view.updateRevision}${view.stableRevision && view.stableRevision !== view.updateRevision ? ` (stable ${view.stableRevision})` : ""}`,
          ),
          h("span", { cls: "num" }, updatedOf(ds)),
          badge(st.label, st.tone),
          h("span", { cls: "muted" }, view.message),
        ];
      }),
    );
    body.replaceChildren(
      table(
        ["Name", "Namespace", "Revision", "Updated", "Rollout", "Why"],
        rows,
        "No DaemonSet yet. Send one with `fleetlet apply -f FILE --hub URL`.",
        "daemonsets",
      ),
    );
  };
  const refresh = refresher(body, load);
  return { update: () => void refresh(), title: "DaemonSets" };
}

/**
 * @param {RolloutView} view
 */
function failure(view) {
  const f = view.failed;
  if (!f) return null;
  return h(
    "section",
    { cls: "panel panel-bad", id: "rollout-stopped" },
    h("h2", null, `Rollout of revision ${f.revision} stopped`),
    h("p", null, `Device `, link(["nodes", f.device], f.device), `: ${f.message}`),
    h(
      "p",
      { cls: "muted" },
      f.rolledBack
        ? `The devices that got revision ${f.revision} were sent revision ${view.stableRevision ?? "?"} again.`
        : "Automatic rollback is off: the devices keep what they got.",
    ),
  );
}

/**
 * The rollout's state, revision and strategy.
 * @param {RolloutView} view
 */
function rolloutPanel(view) {
  const st = rolloutState(view.phase);
  const s = view.settings;
  return panel(
    "Rollout",
    facts([
      [
        "State",
        [badge(st.label, st.tone), " ", h("span", { id: "rollout-message" }, view.message)],
      ],
      [
        "Revision",
        `${view.updateRevision}${view.stableRevision !== undefined ? ` · last fully rolled out: ${view.stableRevision}` : ""}`,
      ],
      [
        "Strategy",
        `maxUnavailable ${s.maxUnavailable} · canary ${s.canary} · minReadySeconds ${s.minReadySeconds} · progress deadline ${s.progressDeadlineSeconds}s · auto-rollback ${s.autoRollback ? "on" : "off"}`,
      ],
    ]),
  );
}

/**
 * Every kept revision, newest first: how many devices were sent it, and which is current.
 * @param {RolloutView} view
 * @param {import("./rollout-model.js").ControllerRevision[]} history
 */
function revisionsPanel(view, history) {
  return panel(
    "Revisions",
    table(
      ["Revision", "", "Devices sent it", "Change cause", "Created"],
      revisionRows(view, history).map((r) => [
        h("span", { cls: "num" }, String(r.revision)),
        r.mark === undefined ? "" : badge(r.mark.label, r.mark.tone),
        h("span", { cls: "num" }, String(r.devices)),
        h("span", { cls: "muted" }, r.cause || "—"),
        h("span", { cls: "muted" }, r.created),
      ]),
      "It has no revision.",
      "revisions",
    ),
  );
}

/**
 * The devices the DaemonSet selects, those that need attention first.
 * @param {RolloutView} view
 */
function devicesPanel(view) {
  const devices = devicesByAttention(view.devices);
  return panel(
    `Devices (${devices.length})`,
    table(
      ["Device", "Revision", "Running", "State", "Why"],
      devices.slice(0, MAX_ROWS).map((d) => {
        const ds = deviceRolloutState(d.state);
        return [
          link(["nodes", d.name], d.name),
          h("span", { cls: "num" }, d.revision === undefined ? "—" : String(d.revision)),
          h("span", { cls: "num" }, d.running === undefined ? "—" : String(d.running)),
          badge(ds.label, ds.tone),
          h("span", { cls: "muted" }, d.message ?? ""),
        ];
      }),
      "No device matches its node selection.",
      "rollout-devices",
    ),
  );
}

/**
 * One DaemonSet and its rollout.
 * @param {HTMLElement} root
 * @param {Api} api
 * @param {string} namespace
 * @param {string} name
 */
export function mountDaemonSet(root, api, namespace, name) {
  const body = h("div", { id: "daemonset", cls: "stack" }, h("p", { cls: "muted" }, "Loading…"));
  root.replaceChildren(
    h(
      "div",
      { cls: "page-head" },
      h("h1", null, `DaemonSet ${name}`),
      link(["daemonsets"], "← DaemonSets"),
    ),
    body,
  );
  const base = `/apis/apps/v1/namespaces/${encodeURIComponent(namespace)}/daemonsets/${encodeURIComponent(name)}`;
  const load = async () => {
    /** @type {RolloutView} */
    const view = await api(`${base}/rollout`);
    /** @type {{ items: import("./rollout-model.js").ControllerRevision[] }} */
    const history = await api(`${base}/history`);
    body.replaceChildren(
      failure(view) ?? "",
      rolloutPanel(view),
      revisionsPanel(view, history.items),
      devicesPanel(view),
    );
  };
  const refresh = refresher(body, load);
  return { update: () => void refresh(), title: `DaemonSet ${name}` };
}
