// @ts-check
// One pod: its status, conditions, each container with its state, probes and readiness, and the
// pod's recent events.
import { ago, badge, chips, code, facts, h, link, panel, table } from "./dom.js";
import { describeProbe, eventIsFor, podState, ready, restarts } from "./model.js";
import { eventTable } from "./node-view.js";

/** @typedef {import("./live.js").FleetState} FleetState */
/** @typedef {import("./model.js").KObject} KObject */
/** @typedef {import("./dom.js").Tone} Tone */

/**
 * A container state as a badge and a line of detail.
 * @param {any} s ContainerState
 * @param {number} now
 * @returns {[string, Tone, (Node | string)[]]}
 */
function containerState(s, now) {
  if (s?.running) return ["Running", "ok", ["started ", ago(s.running.startedAt, now)]];
  if (s?.terminated) {
    const t = s.terminated;
    const tone = t.exitCode === 0 ? "ok" : "bad";
    return [
      t.reason || "Terminated",
      tone,
      [
        `exit code ${t.exitCode}`,
        t.signal ? `, signal ${t.signal}` : "",
        " · finished ",
        ago(t.finishedAt, now),
        t.message ? ` · ${t.message}` : "",
      ],
    ];
  }
  const reason = s?.waiting?.reason || "Waiting";
  const tone = reason === "ContainerCreating" || reason === "PodInitializing" ? "warn" : "bad";
  return [reason, tone, [s?.waiting?.message ?? ""]];
}

/**
 * What a probe of a container currently says, from the container's status.
 * @param {string} kind Startup, Liveness or Readiness
 * @param {any} st ContainerStatus or undefined
 * @returns {[string, Tone]}
 */
function probeState(kind, st) {
  if (!st?.state?.running) return ["Not running", "none"];
  if (kind === "Startup") return st.started ? ["Succeeded", "ok"] : ["Waiting", "warn"];
  if (kind === "Readiness") return st.ready ? ["Passing", "ok"] : ["Failing", "bad"];
  return st.started === false ? ["Not started", "none"] : ["Checking", "ok"];
}

/**
 * @param {any} spec Container
 * @param {any} st ContainerStatus or undefined
 * @param {boolean} init
 * @param {number} now
 */
function containerCard(spec, st, init, now) {
  const [label, tone, detail] = containerState(st?.state, now);
  const last = st?.lastState?.terminated;
  return h(
    "article",
    { cls: "container" },
    h(
      "header",
      null,
      h("h3", null, spec.name, init ? h("span", { cls: "muted small" }, " init container") : null),
      h(
        "div",
        { cls: "head-badges" },
        badge(label, tone),
        init ? null : badge(st?.ready ? "Ready" : "Not ready", st?.ready ? "ok" : "warn"),
      ),
    ),
    h("p", { cls: "muted small" }, ...detail),
    facts([
      ["Image", code(spec.image ?? st?.image ?? "")],
      ["Restarts", String(st?.restartCount ?? 0)],
      ["Started", st?.started === undefined ? "" : st.started ? "yes" : "no"],
      [
        "Last exit",
        last
          ? `${last.reason || "Terminated"} (exit code ${last.exitCode}), ${ago(last.finishedAt, now).textContent}`
          : "",
      ],
      [
        "Command",
        spec.command || spec.args
          ? code([...(spec.command ?? []), ...(spec.args ?? [])].join(" "))
          : "",
      ],
      [
        "Container ID",
        st?.containerID ? code(st.containerID.replace(/^(\w+:\/\/)(.{12}).*$/, "$1$2…")) : "",
      ],
    ]),
    probeList(spec, st),
  );
}

/**
 * Each probe of a container: its kind, what it says now, and how it probes.
 * @param {any} spec Container
 * @param {any} st ContainerStatus or undefined
 */
function probeList(spec, st) {
  const probes = /** @type {[string, any][]} */ ([
    ["Startup", spec.startupProbe],
    ["Liveness", spec.livenessProbe],
    ["Readiness", spec.readinessProbe],
  ]).filter(([, p]) => p);
  if (!probes.length) return h("p", { cls: "muted small" }, "No probes.");
  return h(
    "ul",
    { cls: "probes", attrs: { "aria-label": "probes" } },
    probes.map(([kind, p]) => {
      const [plabel, ptone] = probeState(kind, st);
      return h(
        "li",
        null,
        h("span", { cls: "probe-kind" }, kind),
        badge(plabel, ptone),
        h("span", { cls: "probe-how" }, describeProbe(p)),
      );
    }),
  );
}

/**
 * @param {KObject} pod
 * @param {number} now
 */
function podConditions(pod, now) {
  const cs = /** @type {any[]} */ (pod.status?.conditions ?? []);
  return panel(
    "Conditions",
    table(
      ["Type", "Status", "Reason", "Changed"],
      cs.map((c) => [
        h("span", { cls: "strong" }, c.type),
        badge(c.status, c.status === "True" ? "ok" : c.status === "False" ? "bad" : "warn"),
        c.reason ?? "",
        ago(c.lastTransitionTime, now),
      ]),
      "No conditions reported.",
    ),
  );
}

/**
 * @param {FleetState} state
 * @param {string} node
 * @param {string} ns
 * @param {string} name
 */
function findPod(state, node, ns, name) {
  return state
    .podsOf(node)
    .find((p) => p.metadata.name === name && (p.metadata.namespace ?? "default") === ns);
}

/**
 * The breadcrumb of a pod's page.
 * @param {string} node
 * @param {string} name
 */
function podCrumbs(node, name) {
  return h(
    "nav",
    { cls: "crumbs", attrs: { "aria-label": "breadcrumb" } },
    link([""], "Fleet"),
    " / ",
    link(["nodes", node], node),
    " / ",
    name,
  );
}

/**
 * The pod's name, state and readiness badges, and a line of phase and restarts.
 * @param {KObject} pod
 * @param {string} ns
 * @param {string} name
 */
function podHead(pod, ns, name) {
  const s = podState(pod);
  const r = ready(pod);
  const st = pod.status ?? {};
  return h(
    "div",
    { cls: "page-head" },
    h("h1", null, name),
    h(
      "div",
      { cls: "head-badges" },
      badge(s.label, s.tone),
      badge(`${r.ready}/${r.total} ready`, r.ready === r.total ? "ok" : "warn"),
    ),
    h(
      "p",
      { cls: "muted" },
      `namespace ${ns} · ${st.phase ?? "Unknown"} · ${restarts(pod)} restarts`,
      st.message ? ` · ${st.message}` : "",
    ),
  );
}

/**
 * The pod's facts (device, IPs, QoS, UID) and labels.
 * @param {KObject} pod
 * @param {string} node
 * @param {number} now
 */
function podFacts(pod, node, now) {
  const st = pod.status ?? {};
  return panel(
    "Pod",
    facts([
      ["Device", link(["nodes", node], node)],
      ["Started", ago(st.startTime, now)],
      ["Pod IP", st.podIP && code(st.podIP)],
      ["Host IP", st.hostIP && code(st.hostIP)],
      ["QoS class", st.qosClass],
      ["Restart policy", pod.spec?.restartPolicy],
      ["UID", pod.metadata.uid && code(pod.metadata.uid)],
    ]),
    chips(pod.metadata.labels),
  );
}

/**
 * A card for each init container, then each container.
 * @param {KObject} pod
 * @param {number} now
 */
function podContainers(pod, now) {
  const st = pod.status ?? {};
  const statuses = /** @type {any[]} */ (st.containerStatuses ?? []);
  const initStatuses = /** @type {any[]} */ (st.initContainerStatuses ?? []);
  return panel(
    "Containers",
    h(
      "div",
      { cls: "containers" },
      (pod.spec?.initContainers ?? []).map((/** @type {any} */ c) =>
        containerCard(
          c,
          initStatuses.find((x) => x.name === c.name),
          true,
          now,
        ),
      ),
      (pod.spec?.containers ?? []).map((/** @type {any} */ c) =>
        containerCard(
          c,
          statuses.find((x) => x.name === c.name),
          false,
          now,
        ),
      ),
    ),
  );
}

/**
 * Mounts the page of pod `ns/name` on device `node`.
 * @param {HTMLElement} root
 * @param {FleetState} state
 * @param {string} node
 * @param {string} ns
 * @param {string} name
 */
export function mountPod(root, state, node, ns, name) {
  const update = (now = Date.now()) => {
    const crumbs = podCrumbs(node, name);
    const pod = findPod(state, node, ns, name);
    if (!pod) {
      root.replaceChildren(
        crumbs,
        h(
          "p",
          { cls: "notice" },
          `No pod "${ns}/${name}" on device "${node}" (it may have been removed).`,
        ),
      );
      return;
    }
    root.replaceChildren(
      crumbs,
      podHead(pod, ns, name),
      h("div", { cls: "grid-2" }, podFacts(pod, node, now), podConditions(pod, now)),
      podContainers(pod, now),
      panel(
        "Events",
        eventTable(
          state.eventsOf(node).filter((e) => eventIsFor(e, node, pod)),
          now,
          false,
        ),
      ),
    );
  };
  return { update, title: `${name} · ${node}` };
}
