// PodConfig merges the desired pods of every source ("file", and "api" for the hub's pods) into
// one stream of incremental updates for the sync loop, as the kubelet's config package does.
// Each source sends complete snapshots (SET); PodConfig diffs each against what it holds for
// that source.
//
// Invariants:
// - a pod full name (namespace/name) belongs to at most one source: the first of
//   `deps.sources` (the highest priority) whose snapshot has it. A lower source's pod with that
//   name is refused (reported once, and listed by conflicts()) until the name is free; a lower
//   source's running pod is removed when a higher source claims its name. Within one snapshot
//   the first pod of a name wins;
// - the updates of one snapshot are queued in the kubelet's order: REMOVE, ADD, UPDATE, DELETE,
//   RECONCILE; a source's first snapshot with no ADD/UPDATE/DELETE queues an empty ADD, so
//   that the consumer wakes up and sees seenAllSources();
// - a pod keeps its config.seen annotation for as long as its uid is held.

import type { Pod } from "../../api/index.ts";
import { jsonEqual } from "../../util/canonical.ts";
import type { Clock } from "../../util/clock.ts";
import { deepFreeze } from "../../util/freeze.ts";
import {
  CONFIG_MIRROR_ANNOTATION,
  CONFIG_SEEN_ANNOTATION,
  CONFIG_SOURCE_ANNOTATION,
  rfc3339Nano,
} from "./parse.ts";
import { PodUpdateQueue } from "./update-queue.ts";

/** "file": the manifest folder; "api": the hub's pods (the kubelet's name for non-file pods). */
export type PodSourceName = "file" | "api";

/**
 * ADD: a new pod. UPDATE: a pod whose spec, labels or annotations changed. REMOVE: a pod no
 * longer desired (stop it). DELETE: a pod that got a deletionTimestamp (stop it gracefully).
 * RECONCILE: only the status sent by the source changed.
 */
type PodOperation = "ADD" | "UPDATE" | "REMOVE" | "RECONCILE" | "DELETE";

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
  /** Every source that will send snapshots, highest priority first; seenAllSources() waits
   * for each. */
  sources: readonly PodSourceName[];
  clock: Clock;
  /** Receives each refused pod once (until it is accepted or leaves its source). */
  onError(conflict: PodConflict): void;
  /** Called when the list of refused pods of `source` changed (grew or shrank). */
  onConflictsChanged?(source: PodSourceName): void;
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
  /** The pods of `source`'s latest snapshot that are refused now, and why. */
  conflicts(source: PodSourceName): PodConflict[];
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

/** What applying one source's snapshot changed. */
interface SourceUpdates {
  source: PodSourceName;
  out: Record<PodOperation, Pod[]>;
  firstSet: boolean;
}

function fullName(pod: Pod): string {
  return `${pod.metadata.namespace ?? ""}/${pod.metadata.name}`;
}

class MergedPodConfig implements PodConfig {
  readonly updates = new PodUpdateQueue();
  /** Per source: its accepted pods by uid. */
  private readonly accepted = new Map<PodSourceName, Map<string, Pod>>();
  /** Per source: its last snapshot as sent. */
  private readonly latest = new Map<PodSourceName, Pod[]>();
  /** Per source: conflicts reported, by a key of name, uid and message. */
  private readonly reported = new Map<PodSourceName, Map<string, PodConflict>>();

  constructor(private readonly deps: PodConfigDeps) {}

  set(source: PodSourceName, pods: readonly Pod[]): void {
    const rank = this.deps.sources.indexOf(source);
    if (rank < 0) throw new Error(`PodConfig: unknown source ${JSON.stringify(source)}`);
    const firstSet = !this.latest.has(source);
    this.latest.set(source, structuredClone([...pods]));
    const before = this.namesOf(source);
    const outs = [this.apply(source, firstSet)];
    const after = this.namesOf(source);
    const changed = before.size !== after.size || [...before].some((n) => !after.has(n));
    if (changed) {
      // Lower sources may lose a name to this one, or get back one it let go.
      for (const other of this.deps.sources.slice(rank + 1))
        if (this.latest.has(other)) outs.push(this.apply(other, false));
    }
    for (const op of ["REMOVE", "ADD", "UPDATE", "DELETE", "RECONCILE"] as const)
      for (const out of outs) this.emit(out, op);
  }

  conflicts(source: PodSourceName): PodConflict[] {
    return [...(this.reported.get(source)?.values() ?? [])];
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
    for (const other of this.deps.sources.slice(0, this.deps.sources.indexOf(source))) {
      for (const pod of this.accepted.get(other)?.values() ?? []) owners.set(fullName(pod), other);
    }
    const taken = new Set<string>();
    const admitted: Pod[] = [];
    const reported = new Map<string, PodConflict>();
    const previously = this.reported.get(source) ?? new Map<string, PodConflict>();
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
      const conflict = { source, pod: name, uid: pod.metadata.uid ?? "", message };
      reported.set(key, conflict);
      if (!previously.has(key)) this.deps.onError(conflict);
    }
    this.reported.set(source, reported);
    const changed =
      reported.size !== previously.size || [...reported.keys()].some((k) => !previously.has(k));
    if (changed) this.deps.onConflictsChanged?.(source);
    return admitted;
  }

  /** Diffs the source's admitted pods against what it held; returns the updates to queue. */
  private apply(source: PodSourceName, firstSet: boolean): SourceUpdates {
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
    return { source, out, firstSet };
  }

  /** Queues the updates of one operation; a first snapshot with nothing to do queues an
   * empty ADD. */
  private emit({ source, out, firstSet }: SourceUpdates, op: PodOperation): void {
    if (out[op].length > 0) this.updates.push({ op, source, pods: out[op] });
    else if (op === "ADD" && firstSet && out.UPDATE.length + out.DELETE.length === 0)
      this.updates.push({ op: "ADD", source, pods: [] });
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
function differSemantically(a: Pod, b: Pod): boolean {
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
