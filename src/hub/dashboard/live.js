// @ts-check
// The dashboard's live copy of the fleet: the watch stream (GET /api/v1/watch over WebSocket)
// applied to maps of nodes, pods and events. On every (re)connect the hub sends the current state
// as ADDED; what it no longer has is dropped once that burst is over. A dropped stream is
// reopened with exponential backoff and full jitter, after checking the token is still accepted.

/** @typedef {import("./model.js").KObject} KObject */
/** @typedef {import("./model.js").KEvent} KEvent */
/** @typedef {{ state: "connecting" | "live" | "reconnecting", retryAt?: number, error?: string }} ConnStatus */

/** Events kept per node (the hub keeps about as many). */
const MAX_EVENTS_PER_NODE = 200;
/** How long after a (re)connect the initial state has surely arrived. */
const RESYNC_MS = 1500;

export class FleetState {
  constructor() {
    /** @type {Map<string, KObject>} by node name */
    this.nodes = new Map();
    /** @type {Map<string, KObject & { _node: string }>} by "node/uid" */
    this.pods = new Map();
    /** @type {Map<string, KEvent>} by "node/event name" */
    this.events = new Map();
    /** @type {Map<string, Set<string>>} the keys of `events` by node, to trim each node's */
    this.eventKeys = new Map();
    /** @type {Map<string, number>} the connection generation each object was last seen in */
    this.seen = new Map();
    this.generation = 0;
    /** Bumped on every change; the per-node indexes below are rebuilt when it moves. */
    this.version = 0;
    /** @type {{ version: number, pods: Map<string, (KObject & { _node: string })[]>, events: Map<string, KEvent[]> } | undefined} */
    this.index = undefined;
  }

  /**
   * Applies one watch frame; returns false when it is not one.
   * @param {any} msg
   */
  apply(msg) {
    const o = msg?.object;
    if (!o || typeof o !== "object" || !o.metadata || typeof o.metadata.name !== "string")
      return false;
    const key = keyOf(o);
    if (!key) return false;
    if (msg.type === "DELETED") {
      this.forget(o.kind, key);
      return true;
    }
    if (o.kind === "Pod") o._node = o.spec?.nodeName ?? "";
    this.mapOf(o.kind).set(key, o);
    this.seen.set(`${o.kind}:${key}`, this.generation);
    this.version++;
    if (o.kind === "Event") {
      const node = o.source?.host ?? "";
      const keys = this.eventKeys.get(node);
      if (keys) keys.add(key);
      else this.eventKeys.set(node, new Set([key]));
      this.trimEvents(node);
    }
    return true;
  }

  /**
   * The map holding objects of `kind`.
   * @param {string} kind
   * @returns {Map<string, any>}
   */
  mapOf(kind) {
    return kind === "Node" ? this.nodes : kind === "Pod" ? this.pods : this.events;
  }

  /** @param {string} node */
  trimEvents(node) {
    const keys = this.eventKeys.get(node);
    if (!keys || keys.size <= MAX_EVENTS_PER_NODE) return;
    const mine = [...keys].map((k) => /** @type {[string, KEvent]} */ ([k, this.events.get(k)]));
    mine.sort(([, a], [, b]) => (a?.lastTimestamp ?? "").localeCompare(b?.lastTimestamp ?? ""));
    for (const [k] of mine.slice(0, mine.length - MAX_EVENTS_PER_NODE)) this.forget("Event", k);
  }

  /**
   * Removes one object.
   * @param {string} kind
   * @param {string} key
   */
  forget(kind, key) {
    this.mapOf(kind).delete(key);
    this.seen.delete(`${kind}:${key}`);
    if (kind === "Event") this.eventKeys.get(key.slice(0, key.indexOf("/")))?.delete(key);
    this.version++;
  }

  /** Starts a new connection generation (its initial burst re-marks what still exists). */
  newGeneration() {
    this.generation++;
  }

  /** Drops every object not seen in the current generation; returns how many. */
  prune() {
    let n = 0;
    for (const kind of ["Node", "Pod", "Event"])
      for (const key of [...this.mapOf(kind).keys()])
        if (this.seen.get(`${kind}:${key}`) !== this.generation) {
          this.forget(kind, key);
          n++;
        }
    return n;
  }

  /** Pods and events grouped by node, rebuilt once per change rather than once per node. */
  byNode() {
    if (this.index?.version === this.version) return this.index;
    /** @type {Map<string, (KObject & { _node: string })[]>} */
    const pods = new Map();
    for (const p of this.pods.values()) {
      const list = pods.get(p._node);
      if (list) list.push(p);
      else pods.set(p._node, [p]);
    }
    /** @type {Map<string, KEvent[]>} */
    const events = new Map();
    for (const e of this.events.values()) {
      const host = e.source?.host ?? "";
      const list = events.get(host);
      if (list) list.push(e);
      else events.set(host, [e]);
    }
    this.index = { version: this.version, pods, events };
    return this.index;
  }

  /** @param {string} node */
  podsOf(node) {
    return this.byNode().pods.get(node) ?? [];
  }

  /** @param {string} node */
  eventsOf(node) {
    return this.byNode().events.get(node) ?? [];
  }
}

/** @param {any} o */
function keyOf(o) {
  if (o.kind === "Node") return o.metadata.name;
  if (o.kind === "Pod")
    return `${o.spec?.nodeName ?? ""}/${o.metadata.uid ?? `${o.metadata.namespace}/${o.metadata.name}`}`;
  if (o.kind === "Event") return `${o.source?.host ?? ""}/${o.metadata.name}`;
  return undefined;
}

/**
 * @typedef {object} LiveOptions
 * @property {string} token the operator token
 * @property {FleetState} state
 * @property {() => void} onChange the state changed
 * @property {(s: ConnStatus) => void} onStatus the connection changed
 * @property {(message: string) => void} onUnauthorized the hub refused the token
 * @property {number} [baseMs] first backoff (default 1 s)
 * @property {number} [capMs] backoff cap (default 30 s)
 */

/** Checks the token with the operator API: "ok", "unauthorized" or an error message. */
/** @param {string} token */
export async function checkToken(token) {
  try {
    const res = await fetch("/api/v1/nodes", { headers: { authorization: `Bearer ${token}` } });
    if (res.status === 401) return "unauthorized";
    if (!res.ok) return `the hub answered HTTP ${res.status}`;
    return "ok";
  } catch (err) {
    return `cannot reach the hub: ${/** @type {Error} */ (err).message}`;
  }
}

export class Live {
  /** @param {LiveOptions} opts */
  constructor(opts) {
    this.opts = opts;
    this.attempt = 0;
    this.stopped = false;
    /** @type {WebSocket | undefined} */
    this.ws = undefined;
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.timer = undefined;
  }

  /** Opens the stream (checking the token first). */
  async connect() {
    if (this.stopped) return;
    this.opts.onStatus({ state: this.attempt === 0 ? "connecting" : "reconnecting" });
    const check = await checkToken(this.opts.token);
    if (this.stopped) return;
    if (check === "unauthorized") {
      this.stop();
      this.opts.onUnauthorized("The hub refused this operator token (HTTP 401).");
      return;
    }
    if (check !== "ok") return this.retry(check);
    this.open();
  }

  open() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(
      `${scheme}//${location.host}/api/v1/watch?token=${encodeURIComponent(this.opts.token)}`,
    );
    this.ws = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      this.opts.state.newGeneration();
      this.opts.onStatus({ state: "live" });
      this.timer = setTimeout(() => {
        this.attempt = 0;
        if (this.opts.state.prune() > 0) this.opts.onChange();
      }, RESYNC_MS);
    };
    ws.onmessage = (e) => {
      let msg;
      try {
        msg = JSON.parse(String(e.data));
      } catch {
        return;
      }
      if (this.opts.state.apply(msg)) this.opts.onChange();
    };
    ws.onclose = (e) => {
      if (this.ws !== ws || this.stopped) return;
      this.ws = undefined;
      this.retry(
        opened
          ? `the watch stream closed (${e.code}${e.reason ? `: ${e.reason}` : ""})`
          : "cannot open the watch stream",
      );
    };
  }

  /** @param {string} error */
  retry(error) {
    clearTimeout(this.timer);
    const base = this.opts.baseMs ?? 1000;
    const cap = this.opts.capMs ?? 30_000;
    const wait = Math.random() * Math.min(cap, base * 2 ** this.attempt);
    this.attempt++;
    this.opts.onStatus({ state: "reconnecting", retryAt: Date.now() + wait, error });
    this.timer = setTimeout(() => void this.connect(), wait);
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    this.ws?.close(1000, "dashboard closed");
    this.ws = undefined;
  }
}
