// What each pod's containers hold (the kubelet's podDevices): one entry per container and
// resource, kept until the pod is gone, whatever happens to the devices or their plugin.
// Invariant: at most one entry per (pod, container, resource).
import type { CheckpointEntry } from "./checkpoint.ts";
import type { ContainerAllocation } from "./types.ts";

export class PodDevices {
  /** Entries by pod UID. */
  private readonly byPod = new Map<string, CheckpointEntry[]>();

  constructor(entries: readonly CheckpointEntry[] = []) {
    this.add(entries);
  }

  /** Records entries; one for a (pod, container, resource) already held replaces it. */
  add(entries: readonly CheckpointEntry[]): void {
    for (const e of entries) {
      const list = (this.byPod.get(e.podUid) ?? []).filter(
        (o) => o.containerName !== e.containerName || o.resourceName !== e.resourceName,
      );
      list.push(e);
      this.byPod.set(e.podUid, list);
    }
  }

  /** Forgets these entries (the same pod, container and resource). */
  remove(entries: readonly CheckpointEntry[]): void {
    for (const e of entries) {
      const list = (this.byPod.get(e.podUid) ?? []).filter(
        (o) => o.containerName !== e.containerName || o.resourceName !== e.resourceName,
      );
      if (list.length > 0) this.byPod.set(e.podUid, list);
      else this.byPod.delete(e.podUid);
    }
  }

  /** Forgets a pod's entries; whether it had any. */
  removePod(uid: string): boolean {
    return this.byPod.delete(uid);
  }

  /** UIDs of the pods holding devices. */
  pods(): string[] {
    return [...this.byPod.keys()];
  }

  all(): CheckpointEntry[] {
    return [...this.byPod.values()].flat();
  }

  /** A container's entries, by resource name order. */
  containerEntries(uid: string, container: string): CheckpointEntry[] {
    return (this.byPod.get(uid) ?? [])
      .filter((e) => e.containerName === container)
      .sort((a, b) => (a.resourceName < b.resourceName ? -1 : 1));
  }

  /** The ids a container holds of a resource, or undefined when it holds none. */
  ids(uid: string, container: string, resource: string): string[] | undefined {
    return this.byPod
      .get(uid)
      ?.find((e) => e.containerName === container && e.resourceName === resource)?.deviceIds;
  }

  /** Every id of `resource` held by a pod that `counts`. */
  held(resource: string, counts: (uid: string) => boolean): Set<string> {
    const out = new Set<string>();
    for (const [uid, entries] of this.byPod) {
      if (!counts(uid)) continue;
      for (const e of entries)
        if (e.resourceName === resource) for (const id of e.deviceIds) out.add(id);
    }
    return out;
  }
}

/** One container's allocations of every resource merged into one, the first resource (by name)
 * winning where two set the same env, mount, device path or annotation; `conflict` hears of
 * each such clash. */
export function mergeAllocations(
  entries: readonly CheckpointEntry[],
  conflict: (what: string) => void,
): ContainerAllocation {
  const out: ContainerAllocation = {
    envs: {},
    mounts: [],
    devices: [],
    annotations: {},
    cdiDevices: [],
  };
  const mounts = new Map<string, string>();
  const devices = new Map<string, string>();
  for (const e of entries) {
    const a = e.allocation;
    mergeRecord(out.envs, a.envs, (k) => conflict(`env ${k} of ${e.resourceName}`));
    mergeRecord(out.annotations, a.annotations, (k) =>
      conflict(`annotation ${k} of ${e.resourceName}`),
    );
    for (const m of a.mounts) {
      if (keepFirst(mounts, m.containerPath, m.hostPath, `mount ${m.containerPath}`, conflict))
        out.mounts.push({ ...m });
    }
    for (const d of a.devices) {
      if (keepFirst(devices, d.containerPath, d.hostPath, `device ${d.containerPath}`, conflict))
        out.devices.push({ ...d });
    }
    for (const name of a.cdiDevices) if (!out.cdiDevices.includes(name)) out.cdiDevices.push(name);
  }
  return out;
}

function mergeRecord(
  into: Record<string, string>,
  from: Record<string, string>,
  conflict: (key: string) => void,
): void {
  for (const [k, v] of Object.entries(from)) {
    if (!(k in into)) into[k] = v;
    else if (into[k] !== v) conflict(k);
  }
}

/** Whether `key` is new (then remembered with `value`); a clash with another value is told. */
function keepFirst(
  seen: Map<string, string>,
  key: string,
  value: string,
  what: string,
  conflict: (what: string) => void,
): boolean {
  const before = seen.get(key);
  if (before === undefined) {
    seen.set(key, value);
    return true;
  }
  if (before !== value) conflict(what);
  return false;
}
