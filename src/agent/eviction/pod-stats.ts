// What each pod uses, read where it is exact on this host: the pod cgroup for the pod's memory
// working set and task count; the runtime's container stats (CRI ListContainerStats) for each
// container's working set and writable layer; the files themselves for logs (the pod's log
// folder) and disk-backed emptyDir volumes (their folders under the root dir), counted as `du`
// counts them (allocated blocks, each inode once).
//
// Only what a caller asks for is read: on a quiet cycle, the storage of the pods that have a
// local storage limit; under pressure, what the signal's ranking compares for every active pod,
// then the runtime's container figures of the one pod evicted, for its message.
import { type Dirent, lstatSync, readdirSync } from "node:fs";
import { join } from "node:path";
import type { Pod } from "../../api/types.ts";
import type { ContainerStats } from "../../cri/index.ts";
import { LABEL_CONTAINER_NAME, LABEL_POD_UID } from "../kuberuntime/index.ts";
import { podLogDirectory } from "../kuberuntime/sandbox-config.ts";
import { volumeDir } from "../volumes/index.ts";
import { type MemoryCgroup, readText, workingSet } from "./observe.ts";
import type { ContainerUsage, DiskUsage, PodUsage } from "./usage.ts";

export interface PodStatsDeps {
  /** The runtime's stats of this node's containers (of one pod when `podUid` is given). */
  listContainerStats(podUid?: string): Promise<ContainerStats[]>;
  /** The pod's cgroup directories (memory controller, pids controller); undefined without pod
   * cgroups. */
  podCgroup(pod: Pod): { memory?: MemoryCgroup; pids?: string } | undefined;
  rootDir: string;
  podLogsDir: string;
}

/** What to read: the pod cgroup's working set or task count (cheap), logs and volumes (walks
 * folders), and the runtime's container stats (one CRI call: working sets, writable layers). */
export interface StatsWanted {
  memory?: boolean;
  processes?: boolean;
  logs?: boolean;
  volumes?: boolean;
  containers?: boolean;
}

/** `du` of a folder: allocated bytes and inodes, each inode once; a missing folder is empty. */
export function diskUsage(dir: string): DiskUsage {
  const seen = new Set<number>();
  let bytes = 0;
  let inodes = 0;
  const visit = (path: string) => {
    let st: ReturnType<typeof lstatSync>;
    try {
      st = lstatSync(path);
    } catch {
      return;
    }
    if (seen.has(st.ino)) return;
    seen.add(st.ino);
    bytes += st.blocks * 512;
    inodes++;
    if (!st.isDirectory()) return;
    let entries: Dirent[];
    try {
      entries = readdirSync(path, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) visit(join(path, e.name));
  };
  visit(dir);
  return { bytes, inodes };
}

function processCount(dir: string): number | undefined {
  try {
    const n = Number(readText(join(dir, "pids.current")).trim());
    if (Number.isFinite(n)) return n;
  } catch {
    // no pids controller for this cgroup: no figure
  }
  return undefined;
}

function containerUsage(
  pod: Pod,
  stats: readonly ContainerStats[],
  logsDir: string | undefined,
): ContainerUsage[] {
  const byName = new Map<string, ContainerStats>();
  for (const s of stats) {
    const name = s.attributes?.labels[LABEL_CONTAINER_NAME] ?? s.attributes?.metadata?.name;
    if (name === undefined) continue;
    // Several instances of a container (restarts): the running one has memory figures.
    const prior = byName.get(name);
    if (prior === undefined || s.memory?.workingSetBytes) byName.set(name, s);
  }
  const names = [...(pod.spec.initContainers ?? []), ...pod.spec.containers].map((c) => c.name);
  return names.flatMap((name) => {
    const s = byName.get(name);
    const logs = logsDir === undefined ? undefined : diskUsage(join(logsDir, name));
    if (s === undefined && logs === undefined) return [];
    const c: ContainerUsage = { name };
    const ws = s?.memory?.workingSetBytes?.value;
    if (ws !== undefined) c.memory = ws;
    const layer = s?.writableLayer;
    if (layer?.usedBytes)
      c.rootfs = { bytes: layer.usedBytes.value, inodes: layer.inodesUsed?.value ?? 0 };
    if (logs !== undefined) c.logs = logs;
    return [c];
  });
}

/** The pod's local ephemeral volumes on disk, as the kubelet counts them: emptyDirs not in
 * memory, and configMap volumes (secrets and the like are tmpfs here). */
function volumeUsage(pod: Pod, rootDir: string): Map<string, DiskUsage> {
  const out = new Map<string, DiskUsage>();
  const uid = pod.metadata.uid ?? "";
  for (const v of pod.spec.volumes ?? []) {
    if (v.emptyDir !== undefined && v.emptyDir.medium !== "Memory")
      out.set(v.name, diskUsage(volumeDir(rootDir, uid, "emptyDir", v.name)));
    else if (v.configMap !== undefined)
      out.set(v.name, diskUsage(volumeDir(rootDir, uid, "configMap", v.name)));
  }
  return out;
}

/** The usage of each pod, by UID; a pod whose figures cannot be read at all is left out. */
export async function collectPodUsage(
  pods: readonly Pod[],
  deps: PodStatsDeps,
  wanted: StatsWanted,
): Promise<Map<string, PodUsage>> {
  const one = pods.length === 1 ? pods[0]?.metadata.uid : undefined;
  const stats = wanted.containers ? await deps.listContainerStats(one) : [];
  const byPod = new Map<string, ContainerStats[]>();
  for (const s of stats) {
    const uid = s.attributes?.labels[LABEL_POD_UID];
    if (uid === undefined) continue;
    byPod.set(uid, [...(byPod.get(uid) ?? []), s]);
  }
  const out = new Map<string, PodUsage>();
  for (const pod of pods) {
    const uid = pod.metadata.uid ?? "";
    const usage: PodUsage = { containers: [], volumes: new Map() };
    const cg = wanted.memory || wanted.processes ? deps.podCgroup(pod) : undefined;
    if (cg !== undefined) {
      if (wanted.memory && cg.memory) {
        try {
          usage.memory = workingSet(cg.memory);
        } catch {
          // the pod cgroup is gone (the pod stopped meanwhile): no figure
        }
      }
      const tasks = !wanted.processes || cg.pids === undefined ? undefined : processCount(cg.pids);
      if (tasks !== undefined) usage.processes = tasks;
    }
    const logsDir = wanted.logs ? podLogDirectory(deps.podLogsDir, pod) : undefined;
    usage.containers = containerUsage(pod, byPod.get(uid) ?? [], logsDir);
    if (wanted.volumes) usage.volumes = volumeUsage(pod, deps.rootDir);
    if (usage.memory === undefined) {
      const sum = usage.containers.reduce((n, c) => n + (c.memory ?? 0), 0);
      if (usage.containers.some((c) => c.memory !== undefined)) usage.memory = sum;
    }
    out.set(uid, usage);
  }
  return out;
}
