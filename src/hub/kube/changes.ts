// Resource versions for what the fleet reports (nodes, pods, events): every change the fleet
// makes gets the next number, kept with the object so that lists and gets carry it, and the most
// recent changes are kept in a ring so that a watch from a list's resourceVersion misses nothing.
// Numbers start at the hub's start time in milliseconds, so they grow across restarts; a watch
// from a version older than the ring is answered 410 Gone (the client lists again).
import type { KubeObject } from "./resources.ts";

export type ChangeType = "ADDED" | "MODIFIED" | "DELETED";

export interface KubeChange {
  rv: number;
  /** The resource's plural name ("pods"). */
  resource: string;
  type: ChangeType;
  /** The object with its resourceVersion. */
  object: KubeObject;
}

const keyOf = (resource: string, o: KubeObject) =>
  `${resource}/${o.metadata.namespace ?? ""}/${o.metadata.uid ?? o.metadata.name}`;

export class ChangeLog {
  private rv: number;
  private readonly first: number;
  /** The highest rv of a shared change log's trimmed rows (hub replicas). */
  private floor = 0;
  /** The rv of the newest change no longer in the ring (0: none dropped). */
  private dropped = 0;
  private readonly ring: KubeChange[] = [];
  private readonly versions = new Map<string, number>();
  /** Each watch's function for changes, and for its end (`gone`: the log was reset). */
  private readonly subscribers = new Map<(c: KubeChange) => void, () => void>();
  /** The resourceVersion of objects no change since the start (or the last reset) names. */
  private base: number;

  constructor(
    start: number,
    private readonly capacity = 8192,
  ) {
    this.rv = start;
    this.first = start;
    this.base = start;
  }

  /** The resourceVersion of the newest change (a list's). */
  current(): number {
    return this.rv;
  }

  /** Records a change of `object` and tells the watchers. */
  record(resource: string, type: ChangeType, object: KubeObject): void {
    this.recordAt(this.rv + 1, resource, type, object);
  }

  /** Records a change numbered `rv` by a shared change log (hub replicas: numbers grow but may
   * skip, as the log also numbers changes of other kinds). */
  recordAt(rv: number, resource: string, type: ChangeType, object: KubeObject): void {
    this.rv = Math.max(this.rv, rv);
    const key = keyOf(resource, object);
    if (type === "DELETED") this.versions.delete(key);
    else this.versions.set(key, rv);
    const change: KubeChange = { rv, resource, type, object: this.stamp(object, rv) };
    this.ring.push(change);
    if (this.ring.length > this.capacity) this.dropped = this.ring.shift()?.rv ?? this.dropped;
    for (const fn of this.subscribers.keys()) fn(change);
  }

  /** Forgets the version of `object`, let go of without a change (an event past its node's
   * limit): otherwise each such object would be remembered for as long as the hub runs. */
  forget(resource: string, object: KubeObject): void {
    this.versions.delete(keyOf(resource, object));
  }

  /** `object` as served: with the resourceVersion of its last change. */
  withVersion(resource: string, object: KubeObject): KubeObject {
    return this.stamp(object, this.versions.get(keyOf(resource, object)) ?? this.base);
  }

  /** The log has read up to `rv` (hub replicas): what a list says, though no change of this
   * log's kinds came with it. */
  advance(rv: number): void {
    this.rv = Math.max(this.rv, rv);
  }

  /** A shared change log was trimmed up to `rv`: a watch from before it is gone. */
  trimmed(rv: number): void {
    this.floor = Math.max(this.floor, rv);
  }

  /** The changes after `rv`, oldest first; "gone" when some of them are no longer kept. */
  since(rv: number): KubeChange[] | "gone" {
    if (rv < this.first || rv < this.floor || rv < this.dropped) return "gone";
    return this.ring.filter((c) => c.rv > rv);
  }

  /** Calls `fn` for each change from now on, and `gone` if the log is reset (the watch cannot go
   * on: 410 Gone); returns the unsubscribe. */
  subscribe(fn: (c: KubeChange) => void, gone: () => void = () => {}): () => void {
    this.subscribers.set(fn, gone);
    return () => this.subscribers.delete(fn);
  }

  /** Hub replicas: the view was loaded again from the store as of the shared log's `rv` (the
   * replica fell behind its trim), so the changes before it are not all known: every watch open
   * now ends as gone, a watch from before `rv` is gone, and objects are served at `rv` until
   * they change. */
  reset(rv: number): void {
    this.rv = Math.max(this.rv, rv);
    this.floor = Math.max(this.floor, rv);
    this.base = this.rv;
    this.ring.length = 0;
    this.versions.clear();
    const ends = [...this.subscribers.values()];
    this.subscribers.clear();
    for (const gone of ends) gone();
  }

  private stamp(o: KubeObject, rv: number): KubeObject {
    return { ...o, metadata: { ...o.metadata, resourceVersion: String(rv) } };
  }
}
