// The CPU manager's static policy, pure: Guaranteed pods' containers with an integer cpu request
// get exclusive CPUs, taken from the shared pool (the default set) minus the reserved CPUs;
// every other container runs on the shared pool, which includes the reserved CPUs.
//
// Invariants of a valid state: the default set and all assignments are disjoint, together they
// are every online CPU, and the reserved CPUs stay in the default set.
import { cpuToMilli, getPodQOS } from "../../api/index.ts";
import type { Container, Pod } from "../../api/types.ts";
import { allCpus, type CpuTopology } from "./cpu-topology.ts";
import { type CpuSet, difference, formatCpuSet, isSubset, sameSet, union } from "./cpuset.ts";

export type CpuPolicyName = "none" | "static";

export interface CpuManagerState {
  policyName: CpuPolicyName;
  /** The shared pool. */
  defaultCpuSet: CpuSet;
  /** Pod uid → container name → its exclusive CPUs. */
  entries: Record<string, Record<string, CpuSet>>;
}

export function initialState(policyName: CpuPolicyName, topology: CpuTopology): CpuManagerState {
  return { policyName, defaultCpuSet: allCpus(topology), entries: {} };
}

/** The exclusive CPUs a container gets: its cpu request in whole CPUs when the pod is Guaranteed. */
function exclusiveCpus(pod: Pod, c: Container): number {
  if (getPodQOS(pod) !== "Guaranteed") return 0;
  const text = c.resources?.requests?.cpu ?? c.resources?.limits?.cpu;
  if (text === undefined) return 0;
  let milli: number;
  try {
    milli = cpuToMilli(String(text));
  } catch {
    return 0;
  }
  return milli > 0 && milli % 1000 === 0 ? milli / 1000 : 0;
}

/**
 * `n` CPUs of `available`, packed by topology: whole free sockets first, then whole free cores,
 * then single CPUs, each in id order. undefined when fewer than `n` are available.
 */
export function takeByTopology(
  topology: CpuTopology,
  available: CpuSet,
  n: number,
): CpuSet | undefined {
  if (n > available.length) return undefined;
  const free = new Set(available);
  const taken: number[] = [];
  const take = (ids: number[]) => {
    for (const id of ids) {
      free.delete(id);
      taken.push(id);
    }
  };
  const groups = (key: (c: { socket: number; core: number }) => string) => {
    const m = new Map<string, number[]>();
    for (const c of topology.cpus) m.set(key(c), [...(m.get(key(c)) ?? []), c.id]);
    return [...m.values()];
  };
  for (const grouping of [groups((c) => `${c.socket}`), groups((c) => `${c.socket}/${c.core}`)]) {
    for (const ids of grouping) {
      if (n - taken.length >= ids.length && ids.every((id) => free.has(id))) take(ids);
    }
  }
  for (const id of [...free].sort((a, b) => a - b)) {
    if (taken.length >= n) break;
    take([id]);
  }
  return taken.sort((a, b) => a - b);
}

/** The CPUs reserved for the system: `explicit` if given, else ceil(reservedMilli / 1000) taken by topology. */
export function reservedCpus(
  topology: CpuTopology,
  explicit: CpuSet | undefined,
  reservedMilli: number,
): CpuSet {
  if (explicit !== undefined && explicit.length > 0) return explicit;
  return takeByTopology(topology, allCpus(topology), Math.ceil(reservedMilli / 1000)) ?? [];
}

/**
 * Assigns exclusive CPUs to the pod's containers that need them (already assigned are kept), in
 * the order they run: init containers, then app containers. As in the kubelet, the CPUs of an
 * init container that runs to completion may be given again to the containers after it (they
 * never run at the same time); a sidecar's (restartPolicy Always) run beside the app containers
 * and are not. CPUs of an init container that no later container took stay the pod's until it
 * is gone.
 */
export function allocatePod(
  state: CpuManagerState,
  topology: CpuTopology,
  reserved: CpuSet,
  pod: Pod,
): { state: CpuManagerState } | { error: string } {
  const uid = pod.metadata.uid ?? "";
  let defaultSet = state.defaultCpuSet;
  const assigned: Record<string, CpuSet> = { ...state.entries[uid] };
  let reusable: CpuSet = [];
  const inOrder = [
    ...(pod.spec.initContainers ?? []).map((c) => ({ c, runsAlone: c.restartPolicy !== "Always" })),
    ...pod.spec.containers.map((c) => ({ c, runsAlone: false })),
  ];
  for (const { c, runsAlone } of inOrder) {
    const n = exclusiveCpus(pod, c);
    if (n === 0) continue;
    let cpus = assigned[c.name];
    if (cpus === undefined) {
      const available = union(difference(defaultSet, reserved), reusable);
      cpus = takeByTopology(topology, available, n);
      if (cpus === undefined) {
        return {
          error: `not enough cpus available to satisfy request of container ${JSON.stringify(c.name)}: requested=${n}, available=${available.length}`,
        };
      }
      assigned[c.name] = cpus;
      defaultSet = difference(defaultSet, cpus);
    }
    reusable = runsAlone ? union(reusable, cpus) : difference(reusable, cpus);
  }
  if (Object.keys(assigned).length === 0) return { state };
  return {
    state: { ...state, defaultCpuSet: defaultSet, entries: { ...state.entries, [uid]: assigned } },
  };
}

/** Returns the pod's exclusive CPUs to the shared pool. */
export function releasePod(state: CpuManagerState, uid: string): CpuManagerState {
  const assigned = state.entries[uid];
  if (assigned === undefined) return state;
  const entries = { ...state.entries };
  delete entries[uid];
  let defaultSet = state.defaultCpuSet;
  for (const cpus of Object.values(assigned)) defaultSet = union(defaultSet, cpus);
  return { ...state, defaultCpuSet: defaultSet, entries };
}

export function containerCpuSet(state: CpuManagerState, uid: string, name: string): CpuSet {
  return state.entries[uid]?.[name] ?? state.defaultCpuSet;
}

/** Why a restored state cannot be used with this machine and policy, or undefined. */
export function validateState(
  state: CpuManagerState,
  topology: CpuTopology,
  reserved: CpuSet,
): string | undefined {
  const all = allCpus(topology);
  let covered = state.defaultCpuSet;
  for (const [uid, containers] of Object.entries(state.entries)) {
    // Containers of one pod may share CPUs (an init container's, given again to an app
    // container); pods may not, nor with the shared pool.
    let pod: CpuSet = [];
    for (const [name, cpus] of Object.entries(containers)) {
      if (cpus.some((c) => covered.includes(c)))
        return `the CPUs ${formatCpuSet(cpus)} of container ${name} of pod ${uid} are also assigned elsewhere`;
      pod = union(pod, cpus);
    }
    covered = union(covered, pod);
  }
  if (!sameSet(covered, all))
    return `the CPUs in the state (${formatCpuSet(covered)}) are not the online CPUs (${formatCpuSet(all)})`;
  if (state.policyName === "static" && !isSubset(reserved, state.defaultCpuSet))
    return `the reserved CPUs ${formatCpuSet(reserved)} are not all in the shared pool ${formatCpuSet(state.defaultCpuSet)}`;
  return undefined;
}
