// The fleet view of a hub replica (docs/hub-replicas.md, step 3): beside what its own agents
// report (fleet.ts), what other replicas stored, read from the shared change log (follow-view.ts)
// and set here without being written back. A node this replica holds (its agent is connected
// here) is left as this replica has it (its own state is newer than what another stored), but
// for what an operator or the leader set at another replica: the hub's labels, a revoke (the
// holder then closes the agent's connection) and a higher desired generation (the holder sends
// it). A desired generation never goes down in this view.
import type { Event, Pod } from "../api/types.ts";
import { Fleet } from "./fleet.ts";
import type { LoadedState, NodeRecord } from "./store.ts";
import { eventView, podView } from "./views.ts";

export class ReplicaFleet extends Fleet {
  /** Takes node `rec` as stored, unless this replica holds the node (its own state is newer);
   * gives the record it replaced (undefined: none, or not taken), and, when this replica holds
   * the node, `desired` when it took a higher desired generation from the row (to send it) and
   * `revoked` when it took a revoke (to close the agent's connection). */
  applyStoredNode(rec: NodeRecord): {
    taken: boolean;
    old?: NodeRecord;
    desired?: true;
    revoked?: true;
  } {
    if (this.online.has(rec.name)) {
      this.takeHubLabels(rec);
      const revoked = this.takeRevoke(rec);
      return {
        taken: false,
        ...(this.takeDesired(rec) && { desired: true as const }),
        ...(revoked && { revoked: true as const }),
      };
    }
    const old = this.nodes.get(rec.name);
    if (old !== undefined && old.desiredGeneration > rec.desiredGeneration) {
      // Written by a holder that had not yet taken the higher generation: keep it, lest a
      // leader raise the device to a generation it already had with other content.
      rec.desiredGeneration = old.desiredGeneration;
      if (old.desiredHash === undefined) delete rec.desiredHash;
      else rec.desiredHash = old.desiredHash;
    }
    this.nodes.set(rec.name, rec);
    this.received.set(rec.name, rec.ackedSeq);
    this.setStoredOnline(rec);
    this.emitNode(rec.name, old === undefined ? "ADDED" : "MODIFIED");
    return { taken: true, ...(old !== undefined && { old }) };
  }

  /** Takes the hub's labels of a node this replica holds from another replica's row: only an
   * operator sets them, so the holder's next write of the node keeps that operator's change. */
  private takeHubLabels(rec: NodeRecord): void {
    const mine = this.nodes.get(rec.name);
    if (mine === undefined || sameLabels(mine.hubLabels, rec.hubLabels)) return;
    mine.hubLabels = { ...rec.hubLabels };
    if (rec.hubLabelsAt !== undefined) mine.hubLabelsAt = rec.hubLabelsAt;
    this.emitNode(rec.name);
  }

  /** Takes a revoke of a node this replica holds from another replica's row (an operator's):
   * its credential is refused from now on, and the holder's next write of the node keeps it. */
  private takeRevoke(rec: NodeRecord): boolean {
    const mine = this.nodes.get(rec.name);
    if (mine === undefined || rec.revokedAt === undefined || mine.revokedAt !== undefined)
      return false;
    mine.revokedAt = rec.revokedAt;
    this.emitNode(rec.name);
    return true;
  }

  /** Takes the desired generation and content hash of a node this replica holds from another
   * replica's row (the leader's pass) when it is higher than this replica's; written back with
   * this replica's next write of the node, so the store does not go back to an older one. */
  private takeDesired(rec: NodeRecord): boolean {
    const mine = this.nodes.get(rec.name);
    if (mine === undefined || rec.desiredGeneration <= mine.desiredGeneration) return false;
    this.setDesired(rec.name, rec.desiredGeneration, rec.desiredHash ?? "");
    return true;
  }

  /** Another replica took `name`, or the leader released it as this replica's beat had stopped
   * (dead-holders.ts): it is shown as the stored rows that follow say (online meanwhile, as it
   * was here), no longer as this replica has it. */
  override heldElsewhere(name: string): void {
    super.heldElsewhere(name);
    if (this.online.delete(name)) this.onlineElsewhere.add(name);
  }

  /** Drops node `name` as another replica forgot it; gives its record, if it was held. */
  dropStoredNode(name: string): NodeRecord | undefined {
    const rec = this.nodes.get(name);
    const last = this.view(name);
    if (last !== undefined) this.drop(name, last);
    return rec;
  }

  /** Takes everything another replica may have stored from `loaded` (the replica loads its view
   * again: it fell behind the shared log's trim): every stored node as applyStoredNode takes it,
   * the pods and events of the nodes not held here set to the stored ones, and the nodes not
   * stored and not held here dropped. Gives the nodes whose record changed (`rec` undefined:
   * dropped), for the identities' credentials. */
  reloadStored(loaded: LoadedState): { old: NodeRecord | undefined; rec?: NodeRecord }[] {
    const out: { old: NodeRecord | undefined; rec?: NodeRecord }[] = [];
    const stored = new Set(loaded.nodes.map((n) => n.name));
    for (const name of [...this.nodes.keys()])
      if (!stored.has(name) && !this.online.has(name)) out.push({ old: this.dropStoredNode(name) });
    for (const rec of loaded.nodes) {
      const r = this.applyStoredNode(rec);
      if (r.taken) out.push({ old: r.old, rec });
    }
    const pods = groupBy(loaded.pods, (p) => [p.node, p.pod.metadata.uid ?? "", p.pod]);
    const events = groupBy(loaded.events, (e) => [e.node, e.event.metadata.name, e.event]);
    for (const name of stored) {
      if (this.online.has(name)) continue;
      const p = pods.get(name) ?? new Map<string, Pod>();
      for (const uid of [...this.podsOf(name).keys()])
        if (!p.has(uid)) this.applyStoredPod(name, uid, null);
      for (const [uid, pod] of p) this.applyStoredPod(name, uid, pod);
      const e = events.get(name) ?? new Map<string, Event>();
      for (const key of [...this.eventsOf(name).keys()])
        if (!e.has(key)) this.applyStoredEvent(name, key, null, true);
      for (const [key, event] of e) this.applyStoredEvent(name, key, event, true);
    }
    return out;
  }

  /** Sets (null: deletes) a pod of a node another replica holds. */
  applyStoredPod(node: string, uid: string, pod: Pod | null): void {
    if (this.online.has(node)) return;
    const pods = this.podsOf(node);
    const old = pods.get(uid);
    if (pod === null) {
      if (old === undefined) return;
      pods.delete(uid);
      this.opts.onChange({ type: "DELETED", kind: "pods", object: podView(node, old) });
    } else {
      pods.set(uid, pod);
      const type = old === undefined ? "ADDED" : "MODIFIED";
      this.opts.onChange({ type, kind: "pods", object: podView(node, pod) });
    }
    if (pod === null || old === undefined) this.emitNode(node);
  }

  /** Sets (null: deletes) an event of a node another replica holds; a deletion is told to the
   * watchers only with `tell` (an event trimmed by the per-node limit is not). */
  applyStoredEvent(node: string, name: string, event: Event | null, tell: boolean): void {
    if (this.online.has(node)) return;
    const events = this.eventsOf(node);
    const old = events.get(name);
    if (event === null) {
      if (old === undefined || !events.delete(name)) return;
      if (tell)
        this.opts.onChange({ type: "DELETED", kind: "events", object: eventView(node, old) });
      else this.opts.onEventDropped?.(eventView(node, old));
      return;
    }
    events.delete(name);
    events.set(name, event);
    const type = old === undefined ? "ADDED" : "MODIFIED";
    this.opts.onChange({ type, kind: "events", object: eventView(node, event) });
  }
}

/** `items` as node → key → value, by `pick`. */
function groupBy<T, V>(
  items: T[],
  pick: (item: T) => [string, string, V],
): Map<string, Map<string, V>> {
  const out = new Map<string, Map<string, V>>();
  for (const item of items) {
    const [node, key, value] = pick(item);
    let inner = out.get(node);
    if (inner === undefined) {
      inner = new Map();
      out.set(node, inner);
    }
    inner.set(key, value);
  }
  return out;
}

function sameLabels(a: Record<string, string>, b: Record<string, string>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k]);
}
