// @ts-check
// What the dashboard shows, computed from the Kubernetes-shaped objects of the watch stream:
// a pod's status as `get pods` prints it, a node's readiness and connection, fleet totals and
// resource quantities in human units. Pure functions; no DOM.

/** @typedef {"ok" | "warn" | "bad" | "none"} Tone */
/** @typedef {{ label: string, tone: Tone }} State */
/** @typedef {{ metadata: { name: string, namespace?: string, uid?: string, labels?: Record<string, string>, annotations?: Record<string, string>, creationTimestamp?: string, deletionTimestamp?: string }, spec: any, status?: any }} KObject */
/** @typedef {{ metadata: { name: string, namespace?: string }, involvedObject: { kind?: string, name?: string, namespace?: string, fieldPath?: string }, reason: string, message: string, type: string, source: { component?: string, host?: string }, count: number, firstTimestamp: string, lastTimestamp: string }} KEvent */

export const ANNOTATION = {
  online: "hub.fleetlet.io/online",
  lastSeen: "hub.fleetlet.io/last-seen",
  revoked: "hub.fleetlet.io/revoked",
  /** The agent's last update status, "<phase> <version>". */
  update: "hub.fleetlet.io/update",
};

const PENDING_REASONS = new Set([
  "ContainerCreating",
  "PodInitializing",
  "Pending",
  "Terminating",
  "NotReady",
]);

/**
 * What `get pods` shows for `pod`, by the same rules as the CLI (kubectl's printPod): the first
 * init container that has not completed decides (a started sidecar does not), else the last
 * app container with a waiting or terminated reason, else the pod's reason or phase; an
 * evicted pod reads Evicted; Terminating while deleted. The tests check it against the CLI's
 * columns.
 * @param {KObject} pod
 * @returns {{ reason: string, ready: number, total: number, restarts: number }}
 */
function tally(pod) {
  const st = pod.status ?? {};
  /** @type {Map<string, any>} */
  const specs = new Map(
    (pod.spec?.initContainers ?? []).map((/** @type {any} */ c) => [c.name, c]),
  );
  const isSidecar = (/** @type {string} */ name) => specs.get(name)?.restartPolicy === "Always";
  const sidecars = [...specs.keys()].filter(isSidecar).length;
  const total = (pod.spec?.containers?.length ?? 0) + sidecars;
  let reason = st.reason || st.phase || "";
  let ready = 0;
  let restarts = 0;
  let sidecarRestarts = 0;
  let initializing = false;
  const inits = st.initContainerStatuses ?? [];
  for (let i = 0; i < inits.length; i++) {
    const c = inits[i];
    const s = c.state ?? {};
    restarts += c.restartCount ?? 0;
    if (isSidecar(c.name)) sidecarRestarts += c.restartCount ?? 0;
    if (s.terminated && s.terminated.exitCode === 0) continue;
    if (isSidecar(c.name) && c.started === true) {
      if (c.ready) ready++;
      continue;
    }
    initializing = true;
    if (s.terminated) reason = `Init:${terminatedReason(s.terminated)}`;
    else if (s.waiting?.reason && s.waiting.reason !== "PodInitializing")
      reason = `Init:${s.waiting.reason}`;
    else reason = `Init:${i}/${specs.size}`;
    break;
  }
  const conditions = st.conditions ?? [];
  const isTrue = (/** @type {string} */ type) =>
    conditions.some((/** @type {any} */ c) => c.type === type && c.status === "True");
  if (!initializing || isTrue("Initialized")) {
    restarts = sidecarRestarts;
    let running = false;
    for (const c of [...(st.containerStatuses ?? [])].reverse()) {
      const s = c.state ?? {};
      restarts += c.restartCount ?? 0;
      if (s.waiting?.reason) reason = s.waiting.reason;
      else if (s.terminated) reason = terminatedReason(s.terminated);
      else if (s.running && c.ready) {
        running = true;
        ready++;
      }
    }
    if (reason === "Completed" && running) reason = isTrue("Ready") ? "Running" : "NotReady";
  }
  if (st.phase === "Failed" && st.reason === "Evicted") reason = "Evicted";
  if (pod.metadata.deletionTimestamp) {
    if (st.reason === "NodeLost") reason = "Unknown";
    else if (st.phase !== "Succeeded" && st.phase !== "Failed") reason = "Terminating";
  }
  return { reason: reason || "Unknown", ready, total, restarts };
}

/** @param {{ reason?: string, signal?: number, exitCode: number }} t */
function terminatedReason(t) {
  if (t.reason) return t.reason;
  return t.signal ? `Signal:${t.signal}` : `ExitCode:${t.exitCode}`;
}

/**
 * The STATUS column of `get pods` for `pod`, with a tone.
 * @param {KObject} pod
 * @returns {State}
 */
export function podState(pod) {
  const t = tally(pod);
  return { label: t.reason, tone: podTone(t.reason, pod.status?.phase, t) };
}

/**
 * @param {string} reason
 * @param {string | undefined} phase
 * @param {{ ready: number, total: number }} r
 * @returns {Tone}
 */
function podTone(reason, phase, r) {
  if (reason === "Running") return r.ready === r.total ? "ok" : "warn";
  if (reason === "Completed" || reason === "Succeeded") return "ok";
  if (PENDING_REASONS.has(reason) || /^Init:\d+\/\d+$/.test(reason)) return "warn";
  if (reason === "Unknown" || (phase === "Pending" && reason === "Pending")) return "warn";
  return "bad";
}

/**
 * Ready containers of `pod` out of its containers (app containers and sidecars), as READY.
 * @param {KObject} pod
 */
export function ready(pod) {
  const t = tally(pod);
  return { ready: t.ready, total: t.total };
}

/**
 * RESTARTS of `pod` as `get pods` counts them.
 * @param {KObject} pod
 */
export function restarts(pod) {
  return tally(pod).restarts;
}

/**
 * Whether the hub currently hears from `node`.
 * @param {KObject} node
 */
function isOnline(node) {
  return node.metadata.annotations?.[ANNOTATION.online] === "true";
}

/**
 * The node's Ready condition as a state: Ready, NotReady, Unknown; Revoked when cut off.
 * @param {KObject} node
 * @returns {State & { reason?: string, message?: string }}
 */
export function nodeState(node) {
  if (node.metadata.annotations?.[ANNOTATION.revoked]) return { label: "Revoked", tone: "bad" };
  const c = (node.status?.conditions ?? []).find((/** @type {any} */ x) => x.type === "Ready");
  if (!c)
    return {
      label: "Unknown",
      tone: "warn",
      message: "the device has not reported its status yet",
    };
  const base = { reason: c.reason, message: c.message };
  if (c.status === "True") return { label: "Ready", tone: "ok", ...base };
  if (c.status === "False") return { label: "NotReady", tone: "bad", ...base };
  return { label: "Unknown", tone: "warn", ...base };
}

/**
 * The node's connection to the hub as a state.
 * @param {KObject} node
 * @returns {State}
 */
export function connState(node) {
  return isOnline(node) ? { label: "Online", tone: "ok" } : { label: "Offline", tone: "bad" };
}

/**
 * Pressure conditions that are True (MemoryPressure, DiskPressure, PIDPressure).
 * @param {KObject} node
 * @returns {string[]}
 */
export function pressures(node) {
  return (node.status?.conditions ?? [])
    .filter((/** @type {any} */ c) => c.type !== "Ready" && c.status === "True")
    .map((/** @type {any} */ c) => c.type);
}

/**
 * Counts over a set of pods.
 * @param {KObject[]} pods
 */
export function podCounts(pods) {
  let running = 0;
  let pending = 0;
  let failing = 0;
  let restartTotal = 0;
  for (const p of pods) {
    const s = podState(p);
    if (s.tone === "bad") failing++;
    else if (p.status?.phase === "Running") running++;
    else if (s.tone === "warn") pending++;
    restartTotal += restarts(p);
  }
  return { total: pods.length, running, pending, failing, restarts: restartTotal };
}

/**
 * Fleet totals for the overview.
 * @param {KObject[]} nodes
 * @param {KObject[]} pods
 */
export function fleetSummary(nodes, pods) {
  return {
    nodes: nodes.length,
    online: nodes.filter(isOnline).length,
    ready: nodes.filter((n) => nodeState(n).label === "Ready").length,
    underPressure: nodes.filter((n) => pressures(n).length > 0).length,
    pods: podCounts(pods),
  };
}

/** @type {Record<string, number>} */
const BINARY = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };
/** @type {Record<string, number>} */
const DECIMAL = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  "": 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};

/**
 * A Kubernetes quantity ("512Mi", "250m", "1e3") as a number, or NaN.
 * @param {string | undefined} q
 */
export function parseQuantity(q) {
  const m = /^([+-]?[0-9.]+)(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$/.exec(
    String(q ?? "").trim(),
  );
  if (!m) return Number.NaN;
  const n = Number(m[1]);
  if (m[2]) return n * 10 ** Number(m[2].slice(1));
  const unit = m[3] ?? "";
  return n * (BINARY[unit] ?? DECIMAL[unit] ?? 1);
}

/**
 * A quantity of `resource` for people: "1.5 cores", "7.7 GiB", "110".
 * @param {string} resource
 * @param {string | undefined} q
 */
export function formatQuantity(resource, q) {
  if (q === undefined) return "—";
  const n = parseQuantity(q);
  if (Number.isNaN(n)) return q;
  if (resource === "cpu") return `${round(n)} ${n === 1 ? "core" : "cores"}`;
  if (resource === "memory" || resource.endsWith("storage") || resource.startsWith("hugepages-"))
    return bytes(n);
  return String(round(n));
}

/** @param {number} n */
function round(n) {
  return Math.round(n * 100) / 100;
}

/**
 * The images a device reported (Node.status.images, largest first): its first tag (else its
 * first name) and its size.
 * @param {KObject} node
 * @returns {{ name: string, size: string }[]}
 */
export function imageRows(node) {
  const images = /** @type {{ names?: string[], sizeBytes?: number }[]} */ (
    node.status?.images ?? []
  );
  return images.map((i) => {
    const names = i.names ?? [];
    return {
      name: names.find((n) => !n.includes("@")) ?? names[0] ?? "",
      size: bytes(i.sizeBytes ?? 0),
    };
  });
}

/** @param {number} n */
export function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n >= 10 || i === 0 ? Math.round(n) : n.toFixed(1)} ${units[i]}`;
}

/**
 * A probe of a container spec in one line: "HTTP GET :8080/healthz every 10s".
 * @param {any} p
 */
export function describeProbe(p) {
  if (!p) return "";
  let how = "unknown handler";
  if (p.httpGet) how = `HTTP GET :${p.httpGet.port}${p.httpGet.path ?? "/"}`;
  else if (p.tcpSocket) how = `TCP :${p.tcpSocket.port}`;
  else if (p.grpc) how = `gRPC :${p.grpc.port}`;
  else if (p.exec) how = `exec ${(p.exec.command ?? []).join(" ")}`;
  const every = `every ${p.periodSeconds ?? 10}s`;
  const delay = p.initialDelaySeconds ? `, after ${p.initialDelaySeconds}s` : "";
  return `${how} ${every}${delay}, timeout ${p.timeoutSeconds ?? 1}s, fails after ${p.failureThreshold ?? 3}`;
}

/**
 * Whether `e` is about `pod` on `node`.
 * @param {KEvent} e
 * @param {string} node
 * @param {KObject} pod
 */
export function eventIsFor(e, node, pod) {
  const o = e.involvedObject ?? {};
  return (
    (e.source?.host ?? node) === node &&
    o.kind === "Pod" &&
    o.name === pod.metadata.name &&
    (o.namespace ?? "default") === (pod.metadata.namespace ?? "default")
  );
}

/**
 * Events newest first. Timestamps have whole seconds, so events of one second keep the order they
 * arrived in, reversed: the last to arrive first.
 * @param {KEvent[]} events
 */
export function newestFirst(events) {
  return events
    .map((e, i) => /** @type {[KEvent, number]} */ ([e, i]))
    .sort(([a, i], [b, j]) => (b.lastTimestamp ?? "").localeCompare(a.lastTimestamp ?? "") || j - i)
    .map(([e]) => e);
}

/**
 * Repeats folded into one row, as kubectl shows an event with its count: events about the same
 * object with the same type, reason and message become one, counted together, first seen at the
 * earliest and last seen at the latest. The same event seen twice (one name) counts once.
 * @param {KEvent[]} events in the order they arrived
 * @returns {KEvent[]} in the order their last repeat arrived
 */
export function foldRepeats(events) {
  /** @type {Map<string, KEvent>} the newest copy of each event, by name */
  const byName = new Map();
  for (const e of events) {
    const name = e.metadata?.name ?? "";
    const seen = byName.get(name);
    if (seen === undefined || (e.count ?? 1) >= (seen.count ?? 1)) {
      byName.delete(name);
      byName.set(name, e);
    }
  }
  /** @type {Map<string, KEvent>} */
  const folded = new Map();
  for (const e of byName.values()) {
    const o = e.involvedObject ?? {};
    const key = JSON.stringify([
      o.kind,
      o.namespace,
      o.name,
      o.fieldPath,
      e.type,
      e.reason,
      e.message,
    ]);
    const f = folded.get(key);
    folded.delete(key);
    if (f === undefined) {
      folded.set(key, e);
      continue;
    }
    const firsts = [f.firstTimestamp ?? "", e.firstTimestamp ?? ""].filter((t) => t !== "").sort();
    const lasts = [f.lastTimestamp ?? "", e.lastTimestamp ?? ""].sort();
    folded.set(key, {
      ...e,
      count: (f.count ?? 1) + (e.count ?? 1),
      firstTimestamp: firsts[0] ?? "",
      lastTimestamp: lasts[1] ?? "",
    });
  }
  return [...folded.values()];
}
