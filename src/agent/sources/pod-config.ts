// PodConfig merges the desired pods of every source ("file", later "hub") into one stream of
// incremental updates for the sync loop, as the kubelet's config package does. Each source
// sends complete snapshots (SET); PodConfig diffs each against what it holds for that source.
//
// Invariants:
// - a pod full name (namespace/name) belongs to at most one source: the one that holds it
//   first; another source's pod with that name is rejected (reported once) until it is free;
//   within one snapshot the first pod of a name wins;
// - the updates of one snapshot are queued in the kubelet's order: REMOVE, ADD, UPDATE, DELETE,
//   RECONCILE; a source's first snapshot with no ADD/UPDATE/DELETE queues an empty ADD, so
//   that the consumer wakes up and sees seenAllSources();
// - a pod keeps its config.seen annotation for as long as its uid is held.

import type { Pod } from "../../api/index.ts";
import type { Clock } from "../../util/clock.ts";
import { deepFreeze } from "../../util/freeze.ts";
import { jsonEqual } from "./canonical.ts";
import {
  CONFIG_MIRROR_ANNOTATION,
  CONFIG_SEEN_ANNOTATION,
  CONFIG_SOURCE_ANNOTATION,
  rfc3339Nano,
} from "./parse.ts";
import { PodUpdateQueue } from "./update-queue.ts";

export type PodSourceName = "file" | "hub";

/**
 * ADD: a new pod. UPDATE: a pod whose spec, labels or annotations changed. REMOVE: a pod no
 * longer desired (stop it). DELETE: a pod that got a deletionTimestamp (stop it gracefully).
 * RECONCILE: only the status sent by the source changed.
 */
export type PodOperation = "ADD" | "UPDATE" | "REMOVE" | "RECONCILE" | "DELETE";

export interface PodUpdate {
  op: PodOperation;
  source: PodSourceName;
  /** Treat as read-only; they are PodConfig's own copies. */
  pods: Pod[];
}

/** A pod of a source that PodConfig refused. */
export interface PodConflict {
  source: PodSourceName;
  /** The refused pod's namespace/name. */
  pod: string;
  /** The refused pod's uid. */
  uid: string;
  message: string;
}

export interface PodConfigDeps {
  /** Every source that will send snapshots; seenAllSources() waits for each. */
  sources: readonly PodSourceName[];
  clock: Clock;
  /** Receives each refused pod once (until it is accepted or leaves its source). */
  onError(conflict: PodConflict): void;
}

export interface PodConfig {
  /** Replaces the complete set of desired pods of `source` and queues the resulting updates. */
  set(source: PodSourceName, pods: readonly Pod[]): void;
  /** Whether every source has sent at least one snapshot. */
  seenAllSources(): boolean;
  /** The updates, in order, for the one consumer. */
  readonly updates: PodUpdateQueue;
  /** Every pod currently accepted, of all sources. */
  pods(): Pod[];
}

export function createPodConfig(deps: PodConfigDeps): PodConfig {
  return new MergedPodConfig(deps);
}

/** Annotations PodConfig or the source set locally; they never make a pod differ. */
const localAnnotations = [
  CONFIG_SOURCE_ANNOTATION,
  CONFIG_SEEN_ANNOTATION,
  CONFIG_MIRROR_ANNOTATION,
];

function fullName(pod: Pod): string {
  return `${pod.metadata.namespace ?? ""}/${pod.metadata.name}`;
}

class MergedPodConfig implements PodConfig {
  readonly updates = new PodUpdateQueue();
  /** Per source: its accepted pods by uid. */
  private readonly accepted = new Map<PodSourceName, Map<string, Pod>>();
  /** Per source: its last snapshot as sent. */
  private readonly latest = new Map<PodSourceName, Pod[]>();
  /** Per source: conflicts already reported. */
  private readonly reported = new Map<PodSourceName, Set<string>>();

  constructor(private readonly deps: PodConfigDeps) {}

  set(source: PodSourceName, pods: readonly Pod[]): void {
    if (!this.deps.sources.includes(source))
      throw new Error(`PodConfig: unknown source ${JSON.stringify(source)}`);
    const firstSet = !this.latest.has(source);
    this.latest.set(source, structuredClone([...pods]));
    const before = this.namesOf(source);
    this.apply(source, firstSet);
    const after = this.namesOf(source);
    if ([...before].some((n) => !after.has(n))) {
      for (const other of this.latest.keys()) if (other !== source) this.apply(other, false);
    }
  }

  seenAllSources(): boolean {
    return this.deps.sources.every((s) => this.latest.has(s));
  }

  pods(): Pod[] {
    return [...this.accepted.values()].flatMap((m) => [...m.values()]);
  }

  private namesOf(source: PodSourceName): Set<string> {
    return new Set([...(this.accepted.get(source)?.values() ?? [])].map(fullName));
  }

  /** The pods of the source's latest snapshot that it may have, reporting the others. */
  private admit(source: PodSourceName): Pod[] {
    const owners = new Map<string, PodSourceName>();
    for (const [other, pods] of this.accepted) {
      if (other !== source) for (const pod of pods.values()) owners.set(fullName(pod), other);
    }
    const taken = new Set<string>();
    const admitted: Pod[] = [];
    const reported = new Set<string>();
    const previously = this.reported.get(source) ?? new Set<string>();
    for (const pod of this.latest.get(source) ?? []) {
      const name = fullName(pod);
      const owner = owners.get(name);
      let message: string | undefined;
      if (owner !== undefined)
        message = `pod ${JSON.stringify(name)} from source "${source}" is ignored: source "${owner}" already has a pod of that name`;
      else if (taken.has(name))
        message = `pod ${JSON.stringify(name)} from source "${source}" is ignored: the source sent two pods of that name`;
      if (message === undefined) {
        taken.add(name);
        admitted.push(pod);
        continue;
      }
      const key = `${name}\n${pod.metadata.uid ?? ""}\n${message}`;
      reported.add(key);
      if (!previously.has(key))
        this.deps.onError({ source, pod: name, uid: pod.metadata.uid ?? "", message });
    }
    this.reported.set(source, reported);
    return admitted;
  }

  /** Diffs the source's admitted pods against what it held, and queues the updates. */
  private apply(source: PodSourceName, firstSet: boolean): void {
    const old = this.accepted.get(source) ?? new Map<string, Pod>();
    const next = new Map<string, Pod>();
    const out: Record<PodOperation, Pod[]> = {
      ADD: [],
      UPDATE: [],
      REMOVE: [],
      RECONCILE: [],
      DELETE: [],
    };
    for (const pod of this.admit(source)) {
      const uid = pod.metadata.uid ?? "";
      const existing = old.get(uid);
      // Frozen: the agent shares these pods with its workers and its API, never copies them.
      const local = deepFreeze(this.withLocalAnnotations(pod, source, existing));
      if (existing === undefined) {
        out.ADD.push(local);
        next.set(uid, local);
      } else if (differSemantically(existing, local)) {
        out[local.metadata.deletionTimestamp ? "DELETE" : "UPDATE"].push(local);
        next.set(uid, local);
      } else if (!jsonEqual(existing.status, local.status)) {
        const reconciled: Pod = { ...existing };
        if (local.status === undefined) delete reconciled.status;
        else reconciled.status = local.status;
        Object.freeze(reconciled);
        out.RECONCILE.push(reconciled);
        next.set(uid, reconciled);
      } else {
        next.set(uid, existing);
      }
    }
    for (const [uid, pod] of old) if (!next.has(uid)) out.REMOVE.push(pod);
    this.accepted.set(source, next);
    this.emit(source, out, firstSet);
  }

  private emit(source: PodSourceName, out: Record<PodOperation, Pod[]>, firstSet: boolean): void {
    const push = (op: PodOperation) => {
      if (out[op].length > 0) this.updates.push({ op, source, pods: out[op] });
    };
    push("REMOVE");
    push("ADD");
    push("UPDATE");
    push("DELETE");
    if (firstSet && out.ADD.length + out.UPDATE.length + out.DELETE.length === 0) {
      this.updates.push({ op: "ADD", source, pods: [] });
    }
    push("RECONCILE");
  }

  /** The pod with config.source set and config.seen kept from `existing` (or now). */
  private withLocalAnnotations(pod: Pod, source: PodSourceName, existing: Pod | undefined): Pod {
    const seen =
      existing?.metadata.annotations?.[CONFIG_SEEN_ANNOTATION] ??
      pod.metadata.annotations?.[CONFIG_SEEN_ANNOTATION] ??
      rfc3339Nano(this.deps.clock.now());
    const annotations = {
      ...pod.metadata.annotations,
      [CONFIG_SOURCE_ANNOTATION]: source,
      [CONFIG_SEEN_ANNOTATION]: seen,
    };
    return { ...pod, metadata: { ...pod.metadata, annotations } };
  }
}

/** Whether the change from `a` to `b` needs the pod to be synced (not just its status). */
export function differSemantically(a: Pod, b: Pod): boolean {
  return (
    !jsonEqual(a.spec, b.spec) ||
    !jsonEqual(a.metadata.labels ?? {}, b.metadata.labels ?? {}) ||
    !jsonEqual(a.metadata.deletionTimestamp, b.metadata.deletionTimestamp) ||
    !jsonEqual(a.metadata.deletionGracePeriodSeconds, b.metadata.deletionGracePeriodSeconds) ||
    !jsonEqual(a.metadata.generation, b.metadata.generation) ||
    !jsonEqual(sharedAnnotations(a), sharedAnnotations(b))
  );
}

function sharedAnnotations(pod: Pod): Record<string, string> {
  const out = { ...pod.metadata.annotations };
  for (const key of localAnnotations) delete out[key];
  return out;
}
