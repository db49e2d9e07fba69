// The node's eviction signals, measured as the kubelet measures them:
// - memory.available: capacity (MemTotal) minus the root cgroup's working set, i.e. its usage
//   minus its inactive file cache (cgroup v1: memory.usage_in_bytes and total_inactive_file of
//   the memory hierarchy's root; cgroup v2, whose root has no memory.current: MemTotal − MemFree
//   from /proc/meminfo as the usage, less inactive_file of the root's memory.stat, or of
//   /proc/meminfo on a kernel whose root cgroup has no memory.stat);
// - allocatableMemory.available: the pods' cgroup (kubepods) limit minus its working set;
// - nodefs.*: statfs of the agent's root dir (available blocks and free inodes);
// - imagefs.*: statfs of the runtime's image filesystem (the mountpoint of CRI ImageFsInfo);
// - pid.available: the kernel's limit (the lower of pid_max and threads-max) minus the tasks
//   running (the fourth field of /proc/loadavg counts every thread, as sysinfo does);
// - memory.stall: PSI "some" avg10 of /proc/pressure/memory.
// Each reader throws an Error naming the file that could not be read; the manager reports a
// signal that cannot be read once and goes on without it.
import { existsSync, readFileSync, statfsSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Observation } from "../evictionapi/signals.ts";
import { readPsi } from "./psi.ts";

export function readText(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    throw new Error(`cannot read ${path}: ${(err as Error).message}`);
  }
}

function readInt(path: string): number {
  const text = readText(path).trim();
  const n = Number(text);
  if (!Number.isFinite(n)) throw new Error(`${path} holds ${JSON.stringify(text)}, not a number`);
  return n;
}

/** A "key value" file (memory.stat, /proc/meminfo without the "kB") → its numbers. */
function parseKeyed(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    const [k, v, unit] = line.trim().split(/\s+/);
    if (k === undefined || v === undefined) continue;
    const n = Number(v);
    if (Number.isFinite(n)) out.set(k.replace(/:$/, ""), unit === "kB" ? n * 1024 : n);
  }
  return out;
}

/** The number after `key` in a flat keyed file (memory.stat), found without parsing it all. */
function keyed(path: string, key: string): number {
  const text = readText(path);
  const prefix = `${key} `;
  const nl = text.indexOf(`\n${prefix}`);
  const line = text.startsWith(prefix) ? 0 : nl < 0 ? -1 : nl + 1;
  const v = line < 0 ? Number.NaN : Number.parseInt(text.slice(line + prefix.length), 10);
  if (!Number.isFinite(v)) throw new Error(`${path} has no ${key}`);
  return v;
}

export interface MemInfo {
  total: number;
  free: number;
  inactiveFile: number;
}

export function readMeminfo(path = "/proc/meminfo"): MemInfo {
  const m = parseKeyed(readText(path));
  const get = (k: string) => {
    const v = m.get(k);
    if (v === undefined) throw new Error(`${path} has no ${k}`);
    return v;
  };
  return { total: get("MemTotal"), free: get("MemFree"), inactiveFile: get("Inactive(file)") };
}

/** Where the memory controller of a cgroup lives. */
export type MemoryCgroup = { version: 1; dir: string } | { version: 2; dir: string };

/** A cgroup's working set: usage minus inactive file cache (never below 0). */
export function workingSet(cg: MemoryCgroup): number {
  if (cg.version === 1) {
    const usage = readInt(join(cg.dir, "memory.usage_in_bytes"));
    const inactive = keyed(join(cg.dir, "memory.stat"), "total_inactive_file");
    return Math.max(0, usage - inactive);
  }
  const usage = readInt(join(cg.dir, "memory.current"));
  const inactive = keyed(join(cg.dir, "memory.stat"), "inactive_file");
  return Math.max(0, usage - inactive);
}

/** The root cgroup's working set. On v2 the root has no memory.current: its usage is what
 * /proc/meminfo counts as not free. */
function rootWorkingSet(root: MemoryCgroup | undefined, info: MemInfo): number {
  if (root?.version === 1) return workingSet(root);
  const stat = root === undefined ? undefined : join(root.dir, "memory.stat");
  const inactive =
    stat !== undefined && existsSync(stat) ? keyed(stat, "inactive_file") : info.inactiveFile;
  return Math.max(0, info.total - info.free - inactive);
}

/** memory.available of the node; `root` is the memory hierarchy's root cgroup (v1 or v2), or
 * undefined when there is no memory controller (then /proc/meminfo alone). */
export function nodeMemory(root: MemoryCgroup | undefined, meminfo = "/proc/meminfo"): Observation {
  const info = readMeminfo(meminfo);
  return { available: info.total - rootWorkingSet(root, info), capacity: info.total };
}

/** allocatableMemory.available: the pods' cgroup against its limit (`limit` bytes). */
export function podsMemory(pods: MemoryCgroup, limit: number): Observation {
  return { available: limit - workingSet(pods), capacity: limit };
}

export interface FsObservation {
  bytes: Observation;
  inodes: Observation;
}

/** Available bytes and free inodes of the filesystem holding `path`. */
export function filesystem(path: string): FsObservation {
  let s: ReturnType<typeof statfsSync>;
  try {
    s = statfsSync(path);
  } catch (err) {
    throw new Error(`cannot statfs ${path}: ${(err as Error).message}`);
  }
  return {
    bytes: { available: s.bavail * s.bsize, capacity: s.blocks * s.bsize },
    inodes: { available: s.ffree, capacity: s.files },
  };
}

/** The device of the filesystem holding `path` (to tell whether two paths share one). */
export function deviceOf(path: string): number {
  return statSync(path).dev;
}

/** pid.available: the kernel's task limit minus the tasks there are now. */
export function pids(proc = "/proc"): Observation {
  const pidMax = readInt(join(proc, "sys/kernel/pid_max"));
  let limit = pidMax;
  try {
    limit = Math.min(pidMax, readInt(join(proc, "sys/kernel/threads-max")));
  } catch {
    // threads-max is optional: pid_max alone limits then.
  }
  const loadavg = readText(join(proc, "loadavg")).trim();
  const total = Number(loadavg.split(/\s+/)[3]?.split("/")[1]);
  if (!Number.isFinite(total))
    throw new Error(`${join(proc, "loadavg")} holds ${JSON.stringify(loadavg)}: no task count`);
  return { available: limit - total, capacity: limit };
}

/** memory.stall: the share of the last 10 s some task waited for memory, in percent. */
export function memoryStall(root = "/proc/pressure"): Observation {
  return { available: readPsi("memory", root).some.avg10, capacity: 100 };
}
