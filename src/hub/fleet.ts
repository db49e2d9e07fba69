// The hub's live view of the fleet: every node, its pods and recent events, kept in memory and
// mirrored to the store. Agent messages are applied here (after the session checked who sent
// them); each visible change is passed to `onChange` for the watch streams.
// Invariants: a node's received seq ≥ its stored (acked) seq; a pod or event is only ever stored
// under the node whose credential sent it.

import type { Node } from "../api/node.ts";
import type { Event, Pod } from "../api/types.ts";
import type { DesiredAck, Hello, SequencedMessage } from "../protocol/index.ts";
import { checkOwner, emptyNode } from "./fleet-checks.ts";
import { HealthHistory } from "./health.ts";
import { adoptSession, labelStamp, type StoredNode } from "./node-sessions.ts";
import type { DesiredReport, HubStore, LoadedState, NodeProgress, NodeRecord } from "./store.ts";
import { eventView, nodeView, podView, rfc3339 } from "./views.ts";

export type WatchKind = "nodes" | "pods" | "events";
export interface Change {
  type: "ADDED" | "MODIFIED" | "DELETED";
  kind: WatchKind;
  object: Node | Pod | Event;
}

export interface FleetOptions {
  store: HubStore;
  /** The most recent events kept per node. */
  maxEventsPerNode: number;
  /** A node with no message for this long is offline. */
  offlineAfterMs: number;
  onChange: (change: Change) => void;
  /** An event let go of without a watch event (past its node's limit), as served. */
  onEventDropped?: (event: Event) => void;
  /** A node's progress was queued for the store beyond its acknowledged seq (flusher.soon). */
  onQueued?: () => void;
  /** The hub's clock (ms): when a pod reported without a creationTimestamp was first seen. */
  now(): number;
  /** Hub replicas: a node this replica does not hold is shown online or offline as the replica
   * that holds it stored it (NodeRecord.online), and is never marked offline here. */
  storedOnline?: boolean;
}

export type IngestResult = { ok: true } | { ok: false; reason: string };

export class Fleet {
  readonly nodes = new Map<string, NodeRecord>();
  private readonly pods = new Map<string, Map<string, Pod>>();
  private readonly events = new Map<string, Map<string, Event>>();
  /** Online nodes and since when they are offline (absent: online or never seen). */
  protected readonly online = new Set<string>();
  /** Replicas: nodes another replica holds and stored as online (storedOnline). */
  protected readonly onlineElsewhere = new Set<string>();
  protected readonly offlineSince = new Map<string, number>();
  /** The highest seq received per node (not yet necessarily stored). */
  protected readonly received = new Map<string, number>();
  /** Each node's last update.status, "<phase> <version>" (updates/updates.ts). */
  private readonly updateNotes = new Map<string, string>();
  /** Each node's latest health report and a short history (health.ts). */
  readonly health = new HealthHistory();
  /** Nodes another hub replica took (node-sessions.ts): this one leaves their liveness alone. */
  private readonly elsewhere = new Set<string>();

  constructor(
    protected readonly opts: FleetOptions,
    loaded: LoadedState,
  ) {
    for (const n of loaded.nodes) {
      this.nodes.set(n.name, n);
      this.received.set(n.name, n.ackedSeq);
      this.setStoredOnline(n);
    }
    for (const p of loaded.pods) this.podsOf(p.node).set(p.pod.metadata.uid ?? "", p.pod);
    for (const e of loaded.events) this.eventsOf(e.node).set(e.event.metadata.name, e.event);
  }

  podsOf(node: string): Map<string, Pod> {
    let m = this.pods.get(node);
    if (m === undefined) {
      m = new Map();
      this.pods.set(node, m);
    }
    return m;
  }

  eventsOf(node: string): Map<string, Event> {
    let m = this.events.get(node);
    if (m === undefined) {
      m = new Map();
      this.events.set(node, m);
    }
    return m;
  }

  /** Whether event `name` of `node` is held (not yet past its node's limit). */
  hasEvent(node: string, name: string): boolean {
    return this.events.get(node)?.has(name) === true;
  }

  /** Whether the node is online (held here, or by another replica that says so). */
  isOnline(name: string): boolean {
    return this.online.has(name) || this.onlineElsewhere.has(name);
  }

  /** Whether an agent of `name` is connected to this hub. */
  holds(name: string): boolean {
    return this.online.has(name);
  }

  /** Takes the online state another replica stored for `rec` (storedOnline only). */
  protected setStoredOnline(rec: NodeRecord): void {
    if (this.opts.storedOnline !== true) return;
    if (rec.online === true) {
      this.onlineElsewhere.add(rec.name);
      this.offlineSince.delete(rec.name);
    } else {
      this.onlineElsewhere.delete(rec.name);
      if (rec.offlineSince !== undefined) this.offlineSince.set(rec.name, rec.offlineSince);
    }
  }

  /** When node `name` was last heard from, as this hub can tell. A hub replica holding a node
   * stores when it last heard from it only with its other writes of the node (not at every
   * heartbeat), so a node another replica holds and stores as online was heard from within the
   * offline time (its holder would have stored it offline): it is shown as seen now. */
  lastSeen(name: string): number | undefined {
    if (this.onlineElsewhere.has(name)) return this.opts.now();
    return this.nodes.get(name)?.lastSeen;
  }

  /** The Node served for `name`, or undefined when no such node joined. */
  view(name: string): Node | undefined {
    const rec = this.nodes.get(name);
    if (rec === undefined) return undefined;
    const offlineSince = this.offlineSince.get(name);
    return nodeView(rec, {
      online: this.isOnline(name),
      ...(offlineSince !== undefined && { offlineSince }),
      podCount: this.pods.get(name)?.size ?? 0,
      lastSeen: this.lastSeen(name),
      ...(rec.clockSkewMs !== undefined && { clockSkewMs: rec.clockSkewMs }),
      ...(this.updateNotes.has(name) && { update: this.updateNotes.get(name) }),
    });
  }

  allPods(): { node: string; pod: Pod }[] {
    const out: { node: string; pod: Pod }[] = [];
    for (const [node, pods] of this.pods)
      for (const pod of pods.values()) out.push({ node, pod: podView(node, pod) });
    return out;
  }

  allEvents(): { node: string; event: Event }[] {
    const out: { node: string; event: Event }[] = [];
    for (const [node, events] of this.events)
      for (const event of events.values()) out.push({ node, event: eventView(node, event) });
    return out;
  }

  /** The highest seq received from `name`. */
  receivedSeq(name: string): number {
    return this.received.get(name) ?? 0;
  }

  /** Queues the node's progress; `seqOnly`: only its acknowledged seq changed. */
  private progress(rec: NodeRecord, seqOnly = false): void {
    this.opts.store.queueProgress(this.progressOf(rec), seqOnly);
    if (!seqOnly) this.opts.onQueued?.();
  }

  /** What the store keeps of `rec`: its identity fields and seqs, with its online state. */
  private progressOf(rec: NodeRecord): NodeProgress {
    const { node: _node, online: _o, offlineSince: _s, ...progress } = rec;
    const since = this.offlineSince.get(rec.name);
    // A node another replica holds keeps the online state that replica stored.
    const online = this.isOnline(rec.name);
    return { ...progress, online, ...(!online && since !== undefined && { offlineSince: since }) };
  }

  protected emitNode(name: string, type: Change["type"] = "MODIFIED"): void {
    const object = this.view(name);
    if (object !== undefined) this.opts.onChange({ type, kind: "nodes", object });
  }

  /**
   * A session of `name` said hello: starts or resumes its stream and marks it online. Returns
   * the stored seq to put in `welcome`. A new stream forgets the node's pods.
   */
  connect(name: string, hello: Hello, now: number): number {
    const rec = this.nodes.get(name);
    if (rec === undefined) throw new Error(`Cannot connect node "${name}": it has not joined`);
    if (rec.streamId !== hello.streamId) {
      for (const pod of this.podsOf(name).values())
        this.opts.onChange({ type: "DELETED", kind: "pods", object: podView(name, pod) });
      this.pods.delete(name);
      this.opts.store.queueClearPods(name);
      rec.streamId = hello.streamId;
      rec.ackedSeq = 0;
      this.received.set(name, 0);
    }
    this.elsewhere.delete(name);
    rec.connected = true;
    rec.lastSeen = now;
    rec.features = hello.features ?? [];
    if (hello.desiredGeneration !== undefined) rec.ackedGeneration = hello.desiredGeneration;
    this.online.add(name);
    this.onlineElsewhere.delete(name);
    this.offlineSince.delete(name);
    this.progress(rec);
    this.emitNode(name);
    return rec.ackedSeq;
  }

  /**
   * Drops node `name` with its pods and events, in the store and then here (the operator forgot
   * a revoked node); the watch streams get DELETED for each. Returns the Node as it was.
   */
  async forget(name: string): Promise<Node | undefined> {
    const last = this.view(name);
    if (last === undefined) return undefined;
    await this.opts.store.forgetNodeNow(name);
    this.drop(name, last);
    return last;
  }

  /** Drops what is held of node `name` (its Node as served: `last`), telling the watchers. */
  protected drop(name: string, last: Node): void {
    for (const pod of this.pods.get(name)?.values() ?? [])
      this.opts.onChange({ type: "DELETED", kind: "pods", object: podView(name, pod) });
    for (const event of this.events.get(name)?.values() ?? [])
      this.opts.onChange({ type: "DELETED", kind: "events", object: eventView(name, event) });
    this.pods.delete(name);
    this.events.delete(name);
    this.updateNotes.delete(name);
    this.health.forget(name);
    this.nodes.delete(name);
    this.online.delete(name);
    this.onlineElsewhere.delete(name);
    this.offlineSince.delete(name);
    this.received.delete(name);
    this.opts.onChange({ type: "DELETED", kind: "nodes", object: last });
  }

  /** Any message from `name` at `now`: it is alive. */
  touch(name: string, now: number): void {
    const rec = this.nodes.get(name);
    if (rec === undefined) return;
    rec.lastSeen = now;
    if (!this.online.has(name)) {
      this.online.add(name);
      this.offlineSince.delete(name);
      this.progress(rec);
      this.emitNode(name);
    }
  }

  /** Marks `name` offline at `now` (its connection closed or it missed heartbeats). */
  setOffline(name: string, now: number): void {
    if (this.elsewhere.has(name) || !this.online.delete(name)) return;
    this.offlineSince.set(name, now);
    const rec = this.nodes.get(name);
    if (rec !== undefined) this.progress(rec);
    this.emitNode(name);
  }

  /** One pass of offline detection: every online node silent for too long goes offline. */
  checkLiveness(now: number): string[] {
    const gone: string[] = [];
    for (const name of this.online) {
      if (this.elsewhere.has(name)) continue;
      const seen = this.nodes.get(name)?.lastSeen ?? 0;
      if (now - seen > this.opts.offlineAfterMs) gone.push(name);
    }
    for (const name of gone) this.setOffline(name, now);
    return gone;
  }

  /** Records that everything of `name` up to `seq` is stored. */
  stored(name: string, seq: number): void {
    const rec = this.nodes.get(name);
    if (rec !== undefined && seq > rec.ackedSeq) rec.ackedSeq = seq;
  }

  /** The progress to store with the seq received so far (called just before a flush). */
  markReceived(name: string): number {
    const rec = this.nodes.get(name);
    const seq = this.receivedSeq(name);
    if (rec !== undefined) this.progress({ ...rec, ackedSeq: seq }, true);
    return seq;
  }

  /** The agent's report on its desired state (desired.ack). */
  setDesiredAck(name: string, ack: Omit<DesiredAck, "type">): void {
    const rec = this.nodes.get(name);
    if (rec === undefined) return;
    rec.ackedGeneration = ack.generation;
    if (ack.refused === undefined && (ack.conflicts ?? []).length === 0) delete rec.desiredReport;
    else
      rec.desiredReport = {
        ...(ack.refused !== undefined && { refused: ack.refused }),
        conflicts: ack.conflicts ?? [],
      };
    this.progress(rec);
  }

  /** The skew of `name`'s clock measured now (ms, device − hub). The shown figure changes (and
   * watchers hear of it) only when it moved by 2 s or more, so that the jitter of round trips
   * does not make every heartbeat a change. */
  setClockSkew(name: string, skewMs: number): void {
    const rec = this.nodes.get(name);
    if (rec === undefined) return;
    const shown = rec.clockSkewMs;
    if (shown !== undefined && Math.abs(shown - skewMs) < 2_000) return;
    rec.clockSkewMs = skewMs;
    this.progress(rec);
    this.emitNode(name);
  }

  /** Shows the node's last update.status (`text`: "<phase> <version>") on its Node. */
  setUpdateNote(name: string, text: string): void {
    if (!this.nodes.has(name) || this.updateNotes.get(name) === text) return;
    this.updateNotes.set(name, text);
    this.emitNode(name);
  }

  /** Whether `name` was last sent its desired state without its Secrets; whether that changed
   * (then it is queued for the store). */
  setSecretsWithheld(name: string, withheld: boolean): boolean {
    const rec = this.nodes.get(name);
    if (rec === undefined || (rec.secretsWithheld === true) === withheld) return false;
    if (withheld) rec.secretsWithheld = true;
    else delete rec.secretsWithheld;
    this.progress(rec);
    return true;
  }

  desiredReport(name: string): DesiredReport | undefined {
    return this.nodes.get(name)?.desiredReport;
  }

  /** Records the node's desired generation and its content hash (queued for the store). */
  setDesired(name: string, generation: number, hash: string): void {
    const rec = this.nodes.get(name);
    if (rec === undefined) return;
    rec.desiredGeneration = generation;
    rec.desiredHash = hash;
    this.progress(rec);
  }

  /** Replaces the hub's labels of node `name`, stored first (with what is queued): a failed write
   * rejects and changes nothing; false when the node is unknown. */
  async setHubLabels(name: string, labels: Record<string, string>): Promise<boolean> {
    const rec = this.nodes.get(name);
    if (rec === undefined) return false;
    const hubLabelsAt = labelStamp(rec, this.opts.now());
    await this.opts.store.saveNodeNow(this.progressOf({ ...rec, hubLabels: labels, hubLabelsAt }));
    rec.hubLabels = labels;
    rec.hubLabelsAt = hubLabelsAt;
    this.emitNode(name);
    return true;
  }

  /** Applies a sequenced message of `name`; a repeated seq is ignored. */
  ingest(name: string, msg: SequencedMessage): IngestResult {
    const rec = this.nodes.get(name);
    if (rec === undefined) return { ok: false, reason: `node "${name}" has not joined` };
    if (msg.seq <= this.receivedSeq(name)) return { ok: true };
    const refused = checkOwner(name, msg);
    if (refused !== undefined) return { ok: false, reason: refused };
    this.received.set(name, msg.seq);
    switch (msg.type) {
      case "node":
        rec.node = msg.node;
        this.opts.store.queueNode(name, msg.node);
        this.emitNode(name);
        break;
      case "node.patch": {
        const base = rec.node ?? emptyNode(name);
        rec.node = { ...base, status: { ...base.status, ...msg.status } };
        this.opts.store.queueNode(name, rec.node);
        this.emitNode(name);
        break;
      }
      case "pod.upsert":
        this.upsertPod(name, msg.uid, msg.pod);
        break;
      case "pod.delete":
        this.deletePod(name, msg.uid);
        break;
      case "event":
        this.putEvent(name, msg.event);
        break;
    }
    return { ok: true };
  }

  // ---- hub replicas (node-sessions.ts) ----

  /** This replica took `name` from another: its session fields, Node, pods and events become
   * those stored (what this replica held of them may be stale); watchers hear the difference. */
  adopt(name: string, s: StoredNode): void {
    const rec = this.nodes.get(name);
    if (rec === undefined) return;
    adoptSession(rec, s.progress);
    if (s.node !== undefined) rec.node = s.node;
    this.received.set(name, rec.ackedSeq);
    this.elsewhere.delete(name);
    const pods = s.pods.map((p) => [p.metadata.uid ?? "", p] as const);
    replaceAll(this.podsOf(name), pods, (type, pod) =>
      this.opts.onChange({ type, kind: "pods", object: podView(name, pod) }),
    );
    const events = s.events.map((e) => [e.metadata.name, e] as const);
    replaceAll(this.eventsOf(name), events, (type, event) =>
      this.opts.onChange({ type, kind: "events", object: eventView(name, event) }),
    );
    this.emitNode(name);
  }

  /** Another replica holds `name` now: this one no longer marks it offline (nor writes it). */
  heldElsewhere(name: string): void {
    this.elsewhere.add(name);
  }

  private upsertPod(node: string, uid: string, pod: Pod): void {
    const pods = this.podsOf(node);
    const old = pods.get(uid);
    const created =
      pod.metadata.creationTimestamp ?? old?.metadata.creationTimestamp ?? rfc3339(this.opts.now());
    const stored: Pod = { ...pod, metadata: { ...pod.metadata, uid, creationTimestamp: created } };
    const type = old !== undefined ? "MODIFIED" : "ADDED";
    pods.set(uid, stored);
    this.opts.store.queuePod(node, uid, stored);
    this.opts.onChange({ type, kind: "pods", object: podView(node, stored) });
    if (type === "ADDED") this.emitNode(node);
  }

  private deletePod(node: string, uid: string): void {
    const pods = this.podsOf(node);
    const pod = pods.get(uid);
    if (pod === undefined) return;
    pods.delete(uid);
    this.opts.store.queuePod(node, uid, null);
    this.opts.onChange({ type: "DELETED", kind: "pods", object: podView(node, pod) });
    this.emitNode(node);
  }

  private putEvent(node: string, event: Event): void {
    const events = this.eventsOf(node);
    const name = event.metadata.name;
    const type = events.delete(name) ? "MODIFIED" : "ADDED";
    events.set(name, event);
    this.opts.store.queueEvent(node, name, event);
    this.opts.onChange({ type, kind: "events", object: eventView(node, event) });
    while (events.size > this.opts.maxEventsPerNode) {
      const [oldest, dropped] = events.entries().next().value as [string, Event];
      events.delete(oldest);
      this.opts.store.queueEvent(node, oldest, null);
      this.opts.onEventDropped?.(eventView(node, dropped));
    }
  }
}

/** Makes `map` hold `items`, telling `emit` of each change. */
function replaceAll<T>(
  map: Map<string, T>,
  items: readonly (readonly [string, T])[],
  emit: (type: Change["type"], item: T) => void,
): void {
  const next = new Map(items);
  for (const [key, old] of [...map]) {
    if (next.has(key)) continue;
    map.delete(key);
    emit("DELETED", old);
  }
  for (const [key, item] of next) {
    const type = map.has(key) ? "MODIFIED" : "ADDED";
    map.set(key, item);
    emit(type, item);
  }
}
