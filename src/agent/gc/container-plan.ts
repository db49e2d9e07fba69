// The container GC's planner (kubelet's evictContainers and evictSandboxes, pure): which dead
// containers and which sandboxes to remove, from what the runtime lists and what the agent knows
// of each pod. The manager (container-gc.ts) carries the actions out.
//
// Rules, in order:
// - Evictable: every container that is not running and was created at least minAgeMs ago,
//   grouped by (pod UID, container name), newest first; but a container still in state "created"
//   only once it is older than createdGraceMs (the agent may be starting it).
// - Never evictable: the newest instance of each container of a pod that finished (still
//   wanted, phase Succeeded/Failed), or of any pod while the sources are not ready (it may be
//   such a pod). It is the only record that the pod ran: without it a restarted agent would run
//   the pod again.
// - A pod no source wants (and no worker is stopping): all its evictable containers, once every
//   source has been seen.
// - Each group trimmed, oldest first, to maxPerPodContainer (< 0: no limit).
// - Over maxContainers (< 0: no limit): each group trimmed to max(1, maxContainers / groups),
//   then the oldest of all go until maxContainers are left.
// - Sandboxes: a pod keeps its newest sandbox while it is wanted; every other sandbox that is not
//   ready and has no container left after the removals above goes.
import type { ContainerState } from "../kubecontainer/types.ts";

export interface ContainerGCPolicy {
  /** Dead containers created less than this long ago are kept (ms). */
  minAgeMs: number;
  /** Dead instances kept per (pod UID, container name); < 0: no limit. */
  maxPerPodContainer: number;
  /** Dead containers kept on the node; < 0: no limit. */
  maxContainers: number;
}

/**
 * What the agent knows of a pod:
 * - "active": a source wants it, or a pod worker may still run its containers;
 * - "finished": a source wants it and it is done (Succeeded or Failed);
 * - "gone": no source wants it and no worker is on it (meaningful once the sources are ready).
 */
export type PodGCState = "active" | "finished" | "gone";

export interface GCContainer {
  id: string;
  podUid: string;
  /** The container's name in the pod spec. */
  name: string;
  sandboxId: string;
  state: ContainerState;
  /** Epoch ms. */
  createdAt: number;
}

export interface GCSandbox {
  id: string;
  podUid: string;
  ready: boolean;
  /** Epoch ms. */
  createdAt: number;
}

export interface ContainerGCInput {
  containers: readonly GCContainer[];
  sandboxes: readonly GCSandbox[];
  now: number;
  policy: ContainerGCPolicy;
  /** Every pod source was seen once, so a pod they do not name is gone. */
  sourcesReady: boolean;
  /** How long a container may stay "created" while the agent starts it (its StartContainer
   * deadline); younger ones are not dead. */
  createdGraceMs: number;
  podState(uid: string): PodGCState;
}

export type ContainerGCAction =
  | {
      kind: "removeContainer";
      id: string;
      podUid: string;
      name: string;
      /** In "unknown" state: stopped before it is removed (it could be running). */
      stopFirst: boolean;
    }
  | {
      kind: "removeSandbox";
      id: string;
      podUid: string;
      /** Containers of this sandbox removed earlier in the plan: it goes only if they went. */
      after: string[];
    };

type Unit = GCContainer[];

const newestFirst = <T extends { createdAt: number }>(a: T, b: T) => b.createdAt - a.createdAt;

/** The evictable containers, grouped by "uid/name", each group newest first. */
function evictableUnits(input: ContainerGCInput): Map<string, Unit> {
  const newestGCTime = input.now - input.policy.minAgeMs;
  const newest = new Map<string, GCContainer>();
  for (const c of input.containers) {
    const key = `${c.podUid}/${c.name}`;
    const best = newest.get(key);
    if (best === undefined || c.createdAt > best.createdAt) newest.set(key, c);
  }
  const units = new Map<string, Unit>();
  for (const c of input.containers) {
    if (c.state === "running" || c.createdAt > newestGCTime) continue;
    if (c.state === "created" && c.createdAt > input.now - input.createdGraceMs) continue;
    const key = `${c.podUid}/${c.name}`;
    const state = input.podState(c.podUid);
    const record = state === "finished" || (state === "gone" && !input.sourcesReady);
    if (record && newest.get(key) === c) continue;
    const unit = units.get(key) ?? [];
    unit.push(c);
    units.set(key, unit);
  }
  for (const unit of units.values()) unit.sort(newestFirst);
  return units;
}

/** Moves all but the newest `keep` of `unit` to `out`; returns what is kept. */
function trim(unit: Unit, keep: number, out: GCContainer[]): Unit {
  if (unit.length <= keep) return unit;
  out.push(...unit.slice(keep).reverse());
  return unit.slice(0, keep);
}

function count(units: Map<string, Unit>): number {
  let n = 0;
  for (const u of units.values()) n += u.length;
  return n;
}

function containersToRemove(input: ContainerGCInput): GCContainer[] {
  const units = evictableUnits(input);
  const out: GCContainer[] = [];
  const gone = (uid: string) => input.sourcesReady && input.podState(uid) === "gone";
  for (const [key, unit] of units) {
    if (unit[0] !== undefined && gone(unit[0].podUid)) {
      trim(unit, 0, out);
      units.delete(key);
    }
  }
  const { maxPerPodContainer, maxContainers } = input.policy;
  if (maxPerPodContainer >= 0) {
    for (const [key, unit] of units) units.set(key, trim(unit, maxPerPodContainer, out));
  }
  if (maxContainers >= 0 && count(units) > maxContainers) {
    const perUnit = Math.max(1, Math.floor(maxContainers / units.size));
    for (const [key, unit] of units) units.set(key, trim(unit, perUnit, out));
    const left = count(units);
    if (left > maxContainers) {
      const all = [...units.values()].flat().sort(newestFirst);
      trim(all, maxContainers, out);
    }
  }
  return out;
}

function sandboxesToRemove(
  input: ContainerGCInput,
  removed: ReadonlySet<string>,
): ContainerGCAction[] {
  const holding = new Map<string, string[]>();
  const occupied = new Set<string>();
  for (const c of input.containers) {
    if (removed.has(c.id)) {
      const list = holding.get(c.sandboxId) ?? [];
      list.push(c.id);
      holding.set(c.sandboxId, list);
    } else occupied.add(c.sandboxId);
  }
  const byPod = new Map<string, GCSandbox[]>();
  for (const sb of input.sandboxes) {
    const list = byPod.get(sb.podUid) ?? [];
    list.push(sb);
    byPod.set(sb.podUid, list);
  }
  const out: ContainerGCAction[] = [];
  for (const [uid, list] of byPod) {
    list.sort(newestFirst);
    const gone = input.sourcesReady && input.podState(uid) === "gone";
    for (const sb of gone ? list : list.slice(1)) {
      if (sb.ready || occupied.has(sb.id)) continue;
      out.push({ kind: "removeSandbox", id: sb.id, podUid: uid, after: holding.get(sb.id) ?? [] });
    }
  }
  return out;
}

/** The removals of one GC pass: containers (oldest first within each rule), then sandboxes. */
export function planContainerGC(input: ContainerGCInput): ContainerGCAction[] {
  const containers = containersToRemove(input);
  const actions: ContainerGCAction[] = containers.map((c) => ({
    kind: "removeContainer",
    id: c.id,
    podUid: c.podUid,
    name: c.name,
    stopFirst: c.state === "unknown",
  }));
  return [...actions, ...sandboxesToRemove(input, new Set(containers.map((c) => c.id)))];
}
