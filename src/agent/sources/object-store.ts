// The ConfigMaps and Secrets of every source ("file" today, "hub" later), merged into the one
// view the volume manager, container environments and image pulls read. Each source sends its
// complete set (SET semantics), as PodConfig's sources do for pods.
//
// Invariants:
// - an object key (kind/namespace/name) belongs to at most one source: the one that holds it
//   first; another source's object with that key is refused (reported once) until it is free,
//   and then taken over without a gap;
// - listeners hear the keys whose object was added, changed or removed, after the view changed;
// - objects are frozen (the ones set() is given): readers share them and never copy.

import type { ConfigMap, Secret } from "../../api/index.ts";
import { jsonEqual } from "../../util/canonical.ts";
import { deepFreeze } from "../../util/freeze.ts";
import { type ConfigObject, describeObject, objectKey, objectKeyOf } from "./parse.ts";

export { objectsUsedBy } from "../../api/pod-objects.ts";

import type { PodSourceName } from "./pod-config.ts";

/** An object of a source that the store refused. */
export interface ObjectConflict {
  source: PodSourceName;
  kind: ConfigObject["kind"];
  namespace: string;
  name: string;
  message: string;
}

export interface ObjectStoreDeps {
  /** Every source that may send objects, in the order that breaks ties. */
  sources: readonly PodSourceName[];
  /** Receives each refused object once (until it is accepted or leaves its source). */
  onError(conflict: ObjectConflict): void;
}

/** Reads objects by namespace and name; what the volume manager and env need. */
export interface ObjectLookup {
  configMap(namespace: string, name: string): ConfigMap | undefined;
  secret(namespace: string, name: string): Secret | undefined;
}

export interface ObjectStore extends ObjectLookup {
  /** Replaces the complete set of objects of `source`. The store keeps the objects it is given,
   * frozen: the caller must not change them afterwards. */
  set(source: PodSourceName, objects: readonly ConfigObject[]): void;
  /** Calls `fn` with the keys (objectKeyOf) of the objects each set() added, changed or
   * removed; returns an unsubscribe function. */
  subscribe(fn: (changed: ReadonlySet<string>) => void): () => void;
}

export function createObjectStore(deps: ObjectStoreDeps): ObjectStore {
  return new MergedObjectStore(deps);
}

class MergedObjectStore implements ObjectStore {
  /** Per source: its objects by key, as last sent. */
  private readonly bySource = new Map<PodSourceName, Map<string, ConfigObject>>();
  /** Per key: the source whose object is in effect. */
  private readonly owner = new Map<string, PodSourceName>();
  /** Conflicts already reported, per source. */
  private readonly reported = new Map<PodSourceName, Set<string>>();
  private readonly listeners = new Set<(changed: ReadonlySet<string>) => void>();

  constructor(private readonly deps: ObjectStoreDeps) {}

  configMap(namespace: string, name: string): ConfigMap | undefined {
    const o = this.get(objectKeyOf("ConfigMap", namespace, name));
    return o?.kind === "ConfigMap" ? o : undefined;
  }

  secret(namespace: string, name: string): Secret | undefined {
    const o = this.get(objectKeyOf("Secret", namespace, name));
    return o?.kind === "Secret" ? o : undefined;
  }

  subscribe(fn: (changed: ReadonlySet<string>) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  set(source: PodSourceName, objects: readonly ConfigObject[]): void {
    if (!this.deps.sources.includes(source))
      throw new Error(`object store: unknown source ${JSON.stringify(source)}`);
    const old = this.bySource.get(source) ?? new Map<string, ConfigObject>();
    const next = new Map<string, ConfigObject>();
    for (const o of objects) {
      const key = objectKey(o);
      if (next.has(key)) continue;
      const prev = old.get(key);
      // An unchanged file hands the same objects again: no deep comparison for them.
      const same = prev !== undefined && (prev === o || jsonEqual(prev, o));
      next.set(key, same ? prev : deepFreeze(o));
    }
    const keys = new Set([...old.keys(), ...next.keys()]);
    const before = new Map([...keys].map((k) => [k, this.get(k)]));
    this.bySource.set(source, next);
    for (const key of keys) this.assignOwner(key);
    this.reportConflicts();
    const changed = new Set([...keys].filter((k) => before.get(k) !== this.get(k)));
    if (changed.size === 0) return;
    for (const fn of this.listeners) fn(changed);
  }

  private get(key: string): ConfigObject | undefined {
    const source = this.owner.get(key);
    return source === undefined ? undefined : this.bySource.get(source)?.get(key);
  }

  /** Keeps the owner while it holds the key; else the first source (in deps order) that does. */
  private assignOwner(key: string): void {
    const current = this.owner.get(key);
    if (current !== undefined && this.bySource.get(current)?.has(key)) return;
    const holder = this.deps.sources.find((s) => this.bySource.get(s)?.has(key));
    if (holder === undefined) this.owner.delete(key);
    else this.owner.set(key, holder);
  }

  private reportConflicts(): void {
    for (const [source, objects] of this.bySource) {
      const previously = this.reported.get(source) ?? new Set<string>();
      const now = new Set<string>();
      for (const [key, o] of objects) {
        const owner = this.owner.get(key);
        if (owner === source || owner === undefined) continue;
        now.add(key);
        if (previously.has(key)) continue;
        const message = `${describeObject(o)} from source "${source}" is ignored: source "${owner}" already has it`;
        const { name, namespace = "default" } = o.metadata;
        this.deps.onError({ source, kind: o.kind, namespace, name, message });
      }
      this.reported.set(source, now);
    }
  }
}
