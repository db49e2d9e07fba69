// What a hub replica does with the change log's rows (follower.ts): rows of other replicas are
// applied to its view (the fleet's nodes, pods and events, the identities' credentials, the
// deploy objects), which tells its operator watches (watch.ts) as the view changes; every row,
// its own too, goes to the Kubernetes API's change log (kube/changes.ts) under the row's rv, so
// every replica numbers each change alike. Its own rows are not applied again: its view had them
// before they were written. ADDED or MODIFIED is told by whether the log had the key before
// (`known`, seeded with what was loaded), the same at every replica.
import type { Node } from "../api/node.ts";
import type { Event, Pod } from "../api/types.ts";
import type { Logger } from "../util/log.ts";
import type { WatchKind } from "./fleet.ts";
import type { ReplicaFleet } from "./fleet-replica.ts";
import type { Identity } from "./identity.ts";
import type { ChangeLog } from "./kube/index.ts";
import type { KubeObject } from "./kube/resources.ts";
import type { LoggedChange } from "./pg/changes.ts";
import { podKey, splitKey } from "./pg/fleet-changes.ts";
import type { LoadedState, NodeProgress, NodeRecord } from "./store.ts";
import { eventView, nodeView, podView } from "./views.ts";

/** A row of a kind outside the fleet's (DaemonSet, ConfigMap, Secret), written by another
 * replica: its object's stored text (a Secret's sealed), or null when deleted. */
export type ObjectRow = Pick<LoggedChange, "kind" | "key" | "object" | "rv">;

export interface ViewDeps {
  fleet: ReplicaFleet;
  identity: Pick<Identity, "nodeStored">;
  changes: ChangeLog;
  /** Takes a deploy object another replica wrote. */
  object(row: ObjectRow): void;
  /** A node held here whose desired generation was raised by another replica (the leader). */
  desired?(node: string): void;
  /** A node held here that an operator revoked at another replica: its agent is let go. */
  revoked?(node: string): void;
  log: Logger;
}

const FLEET_KINDS = new Set<string>(["nodes", "pods", "events"]);

/** The keys of what was loaded, as the log names them. */
export function loadedKeys(loaded: LoadedState): Set<string> {
  return new Set([
    ...loaded.nodes.map((n) => `nodes/${n.name}`),
    ...loaded.pods.map((p) => `pods/${podKey(p.node, p.pod.metadata.uid ?? "")}`),
    ...loaded.events.map((e) => `events/${podKey(e.node, e.event.metadata.name)}`),
  ]);
}

const recordOf = (text: string): NodeRecord => {
  const o = JSON.parse(text) as { progress: NodeProgress; node: Node | null };
  return { ...o.progress, ...(o.node !== null && { node: o.node }) };
};

export class ViewApplier {
  constructor(
    private readonly deps: ViewDeps,
    private known: Set<string>,
  ) {}

  /** Takes the fleet's view from `loaded` in place of following rows up to its rv (the replica
   * fell behind the log's trim: rows it never read are gone); the Kubernetes API's watches end
   * as gone and go on from there. */
  reload(loaded: LoadedState): void {
    for (const { old, rec } of this.deps.fleet.reloadStored(loaded))
      this.deps.identity.nodeStored(old, rec);
    this.known = loadedKeys(loaded);
    this.deps.changes.reset(loaded.changesRv ?? 0);
  }

  /** Applies `rows` in order; a row that does not parse is logged and passed. */
  apply(rows: LoggedChange[]): void {
    for (const row of rows) {
      try {
        if (!FLEET_KINDS.has(row.kind)) {
          if (!row.own) this.deps.object(row);
          continue;
        }
        this.record(row, row.own ? undefined : this.applyFleet(row));
      } catch (err) {
        this.deps.log.warn("a row of the change log was not applied", {
          rv: row.rv,
          kind: row.kind,
          key: row.key,
          error: err instanceof Error ? err.message : String(err),
        });
      }
    }
    const last = rows[rows.length - 1];
    if (last !== undefined) this.deps.changes.advance(last.rv);
  }

  /** Sets the fleet's view from a row of another replica (not written back); gives a pod's or
   * an event's object as parsed, so it is parsed once. */
  private applyFleet(row: LoggedChange): Pod | Event | null | undefined {
    const { fleet, identity } = this.deps;
    if (row.kind === "nodes") {
      if (row.deleted) identity.nodeStored(fleet.dropStoredNode(row.key), undefined);
      else if (row.object !== null) {
        const rec = recordOf(row.object);
        const r = fleet.applyStoredNode(rec);
        if (r.taken) identity.nodeStored(r.old, rec);
        if (r.desired === true) this.deps.desired?.(rec.name);
        if (r.revoked === true) this.deps.revoked?.(rec.name);
      }
      return undefined;
    }
    const [node, rest] = splitKey(row.key);
    const object = row.deleted || row.object === null ? null : JSON.parse(row.object);
    if (row.kind === "pods") fleet.applyStoredPod(node, rest, object as Pod | null);
    else fleet.applyStoredEvent(node, rest, object as Event | null, row.object !== null);
    return object as Pod | Event | null;
  }

  /** The row in the Kubernetes API's change log, with the object as served (`parsed`: its
   * object, when applyFleet parsed it). */
  private record(row: LoggedChange, parsed?: Pod | Event | null): void {
    const key = `${row.kind}/${row.key}`;
    const had = this.known.has(key);
    if (row.deleted) this.known.delete(key);
    else this.known.add(key);
    const object = this.served(row, parsed);
    if (object === undefined) return;
    const type = row.deleted ? "DELETED" : had ? "MODIFIED" : "ADDED";
    this.deps.changes.recordAt(row.rv, row.kind as WatchKind, type, object as KubeObject);
    // This replica's own event, read back after its node's later events pushed it out (the
    // fleet told the log to forget it then, before this row came): forgotten again.
    if (row.own && row.kind === "events" && !row.deleted) {
      const [node, name] = splitKey(row.key);
      if (!this.deps.fleet.hasEvent(node, name))
        this.deps.changes.forget("events", object as KubeObject);
    }
  }

  private served(row: LoggedChange, parsed?: Pod | Event | null): Node | Pod | Event | undefined {
    if (row.kind === "nodes") {
      if (!row.deleted) return this.deps.fleet.view(row.key);
      return row.object === null
        ? undefined
        : nodeView(recordOf(row.object), { online: false, podCount: 0 });
    }
    if (row.object === null) return undefined;
    const node = splitKey(row.key)[0];
    const object = parsed ?? JSON.parse(row.object);
    if (row.kind === "pods") return podView(node, object as Pod);
    return eventView(node, object as Event);
  }
}
