// What agents reported and the store has not written yet, coalesced by key so that ingest costs a
// map update per message: a node's progress and Node object, its pods and events (null: deleted),
// and the nodes whose stored pods are to be cleared before the pods queued after that. Every
// store implementation takes a batch out to write it in one transaction and puts it back, newer
// entries winning, when the write fails.
import type { Node } from "../api/node.ts";
import type { Event, Pod } from "../api/types.ts";
import type { NodeProgress } from "./store.ts";

/** One batch of queued writes, as a store writes it. */
export interface ReportBatch {
  progress: Map<string, NodeProgress>;
  /** Nodes whose queued progress differs from the stored one only by its acknowledged seq (the
   * change log need not carry it: docs/hub-replicas.md, "The store"). */
  seqOnly: Set<string>;
  nodeObjects: Map<string, Node>;
  /** Nodes whose stored pods are cleared, before `pods` are written. */
  cleared: Set<string>;
  pods: Map<string, { node: string; uid: string; pod: Pod | null }>;
  events: Map<string, { node: string; name: string; event: Event | null }>;
}

const emptyBatch = (): ReportBatch => ({
  progress: new Map(),
  seqOnly: new Set(),
  nodeObjects: new Map(),
  cleared: new Set(),
  pods: new Map(),
  events: new Map(),
});

export class ReportQueue {
  private q = emptyBatch();

  /** Queues a node's progress. `seqOnly`: it changes only the acknowledged seq of what was
   * stored or queued; the mark holds while every progress queued since the last write was so. */
  progress(p: NodeProgress, seqOnly = false): void {
    const q = this.q;
    if (seqOnly && (!q.progress.has(p.name) || q.seqOnly.has(p.name))) q.seqOnly.add(p.name);
    else q.seqOnly.delete(p.name);
    q.progress.set(p.name, p);
  }

  node(name: string, node: Node): void {
    this.q.nodeObjects.set(name, node);
  }

  pod(node: string, uid: string, pod: Pod | null): void {
    this.q.pods.set(`${node}\u0000${uid}`, { node, uid, pod });
  }

  clearPods(node: string): void {
    for (const [key, p] of this.q.pods) if (p.node === node) this.q.pods.delete(key);
    this.q.cleared.add(node);
  }

  event(node: string, name: string, event: Event | null): void {
    this.q.events.set(`${node}\u0000${name}`, { node, name, event });
  }

  /** The queued progress of `name`, if any (to put back after a failed write of a newer one). */
  queuedProgress(name: string): NodeProgress | undefined {
    return this.q.progress.get(name);
  }

  /** Sets (or with undefined drops) the queued progress of `name` (not marked seq-only). */
  restoreProgress(name: string, p: NodeProgress | undefined): void {
    this.q.seqOnly.delete(name);
    if (p === undefined) this.q.progress.delete(name);
    else this.q.progress.set(name, p);
  }

  /** Drops everything queued of node `name`. */
  forget(name: string): void {
    const q = this.q;
    q.progress.delete(name);
    q.seqOnly.delete(name);
    q.nodeObjects.delete(name);
    q.cleared.delete(name);
    for (const [key, p] of q.pods) if (p.node === name) q.pods.delete(key);
    for (const [key, e] of q.events) if (e.node === name) q.events.delete(key);
  }

  size(): number {
    const q = this.q;
    return q.progress.size + q.nodeObjects.size + q.pods.size + q.events.size + q.cleared.size;
  }

  /** Takes everything queued out, leaving the queue empty. */
  take(): ReportBatch {
    const batch = this.q;
    this.q = emptyBatch();
    return batch;
  }

  /** Puts a batch that was not written back, under what was queued since (newer wins; a node's
   * pods cleared since drop its pods of the batch). */
  putBack(b: ReportBatch): void {
    const q = this.q;
    const olderPods = [...b.pods].filter(([, p]) => !q.cleared.has(p.node));
    // Seq-only when every progress of the node, in both, was.
    const seqOnly = new Set<string>();
    for (const name of new Set([...b.progress.keys(), ...q.progress.keys()]))
      if (
        (!b.progress.has(name) || b.seqOnly.has(name)) &&
        (!q.progress.has(name) || q.seqOnly.has(name))
      )
        seqOnly.add(name);
    this.q = {
      progress: new Map([...b.progress, ...q.progress]),
      seqOnly,
      nodeObjects: new Map([...b.nodeObjects, ...q.nodeObjects]),
      pods: new Map([...olderPods, ...q.pods]),
      events: new Map([...b.events, ...q.events]),
      cleared: new Set([...b.cleared, ...q.cleared]),
    };
  }
}

/** The queueing half of a HubStore, the same for every implementation: what agents report goes
 * into one ReportQueue, which the implementation's flush() writes. */
export abstract class QueuedReports {
  protected readonly queue = new ReportQueue();

  queueProgress(progress: NodeProgress, seqOnly = false): void {
    this.queue.progress(progress, seqOnly);
  }

  queueNode(name: string, node: Node): void {
    this.queue.node(name, node);
  }

  queuePod(node: string, uid: string, pod: Pod | null): void {
    this.queue.pod(node, uid, pod);
  }

  queueClearPods(node: string): void {
    this.queue.clearPods(node);
  }

  queueEvent(node: string, name: string, event: Event | null): void {
    this.queue.event(node, name, event);
  }

  pending(): number {
    return this.queue.size();
  }
}
