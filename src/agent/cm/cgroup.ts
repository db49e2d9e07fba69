// The cgroup manager: one interface, a driver per cgroup version (cgroup-v1.ts, cgroup-v2.ts).
// Cgroups are named by their cgroupfs path, e.g. "/kubepods/burstable/pod<uid>", the same name
// the runtime is given as a sandbox's cgroup parent.
//
// The drivers call the file system synchronously: cgroupfs lives in kernel memory and answers in
// microseconds, and a synchronous call costs about a seventh of the CPU of an asynchronous one
// (which goes through a thread pool). A new pod costs some 30 of these calls, and every sync of
// a pod checks its cgroup again.
import { mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** Resources of one cgroup; an absent field is left as it is. */
export interface ResourceConfig {
  /** v1 cpu.shares; converted to cpu.weight on v2. */
  cpuShares?: number;
  /** CFS quota in µs over cpuPeriod; ≤ 0 means no quota. */
  cpuQuota?: number;
  cpuPeriod?: number;
  /** Memory limit in bytes; ≤ 0 means unlimited. */
  memory?: number;
  /** Most tasks; ≤ 0 means unlimited. */
  pidsLimit?: number;
  /** A cpuset list, e.g. "0-1". */
  cpusetCpus?: string;
}

export interface CgroupStats {
  memoryUsageBytes?: number;
  cpuUsageNanos?: number;
  nrPeriods?: number;
  nrThrottled?: number;
  throttledNanos?: number;
  pids?: number;
  /** PSI avg10 of "some" (v2 only, where the kernel has PSI). */
  pressure?: { cpu?: number; memory?: number; io?: number };
}

export interface CgroupManager {
  readonly version: 1 | 2;
  /** The cgroup's path as the host and the runtime know it: the name itself under cgroupfs,
   * its slice path under systemd ("/kubepods/besteffort" → "/kubepods.slice/kubepods-besteffort.slice"). */
  literalName(name: string): string;
  /** Every directory that holds the cgroup (one per v1 hierarchy; one on v2). */
  paths(name: string): string[];
  exists(name: string): Promise<boolean>;
  /** Creates the cgroup and its missing parents, then applies `config`. */
  create(name: string, config: ResourceConfig): Promise<void>;
  /** Applies `config` to an existing cgroup; throws naming the file and value on failure. */
  update(name: string, config: ResourceConfig): Promise<void>;
  stats(name: string): Promise<CgroupStats>;
  /** The processes in the cgroup and its descendants. */
  pids(name: string): Promise<number[]>;
  /** SIGKILLs every process in the cgroup (v2: cgroup.kill where the kernel has it). */
  kill(name: string): Promise<void>;
  /** Removes the cgroup and its descendants (deepest first); a missing cgroup is no error. */
  destroy(name: string): Promise<void>;
  /** The names of the cgroup's direct children (empty if it does not exist). */
  children(name: string): Promise<string[]>;
}

export interface CgroupFsDeps {
  /** Sends a signal to a process (default process.kill); errors for gone processes are ignored. */
  kill?: (pid: number, signal: NodeJS.Signals) => void;
  /** The literal path of a cgroup name (the systemd driver's slice paths); default: the name. */
  literalName?: (name: string) => string;
}

/**
 * A function "/a/b" → "a/b" (of the name's literal path, `literal(name)`), refusing ".." so a
 * name never escapes its hierarchy. It remembers the names it saw lately (each pod's cgroup is
 * named in every hierarchy on every sync); each driver makes its own.
 */
export function createRelativeNames(
  literal: (name: string) => string = (name) => name,
): (name: string) => string {
  const seen = new Map<string, string>();
  return (name) => {
    let rel = seen.get(name);
    if (rel !== undefined) return rel;
    const parts = literal(name)
      .split("/")
      .filter((p) => p !== "" && p !== ".");
    if (parts.includes("..")) throw new Error(`invalid cgroup name ${JSON.stringify(name)}`);
    rel = parts.join("/");
    if (seen.size >= 4096) seen.clear();
    seen.set(name, rel);
    return rel;
  };
}

export function readText(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

export function readNumber(path: string): number | undefined {
  const text = readText(path);
  if (text === undefined) return undefined;
  const n = Number(text.trim());
  return Number.isFinite(n) ? n : undefined;
}

/** Writes a cgroup file; throws naming the file and the value. */
export function writeCgroupFile(path: string, value: string): void {
  try {
    writeFileSync(path, value);
  } catch (err) {
    throw new Error(`Cannot write ${JSON.stringify(value)} to ${path}: ${(err as Error).message}`);
  }
}

/** Creates a cgroup directory and its missing parents; throws naming it. */
export function makeCgroupDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true });
  } catch (err) {
    throw new Error(`Cannot create cgroup ${dir}: ${(err as Error).message}`);
  }
}

/** The pids of cgroup.procs in `dir` and every directory below it. */
export function procsBelow(dir: string): number[] {
  const text = readText(join(dir, "cgroup.procs"));
  if (text === undefined) return [];
  const pids = text
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map(Number)
    .filter((n) => Number.isInteger(n) && n > 0);
  for (const child of subdirs(dir)) pids.push(...procsBelow(join(dir, child)));
  return pids;
}

export function subdirs(dir: string): string[] {
  try {
    const entries = readdirSync(dir, { withFileTypes: true });
    return entries.filter((e) => e.isDirectory()).map((e) => e.name);
  } catch {
    return [];
  }
}

/** rmdir of `dir` and its subdirectories, deepest first; ENOENT is fine. */
export function removeTree(dir: string): void {
  for (const child of subdirs(dir)) removeTree(join(dir, child));
  try {
    rmdirSync(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return;
    throw new Error(`Cannot remove cgroup ${dir}: ${(err as Error).message}`);
  }
}

/** SIGKILLs the pids of `list()` until none is left (at most 5 rounds). */
export async function killAll(
  list: () => number[],
  kill: (pid: number, signal: NodeJS.Signals) => void,
): Promise<void> {
  for (let round = 0; round < 5; round++) {
    const pids = list();
    if (pids.length === 0) return;
    for (const pid of pids) {
      try {
        kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    await Bun.sleep(10 * (round + 1));
  }
}
