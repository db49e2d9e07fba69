// The cgroup v2 driver (cgroupfs on the unified hierarchy): one directory per cgroup. The
// controllers the root offers (cgroup.controllers) are enabled down the path through each
// parent's cgroup.subtree_control; limits are written only for enabled controllers: cpu.weight
// (kubelet's linear conversion of shares), cpu.max, memory.max, pids.max, cpuset.cpus.
import { existsSync } from "node:fs";
import { join } from "node:path";
import {
  type CgroupFsDeps,
  type CgroupManager,
  type CgroupStats,
  createRelativeNames,
  killAll,
  makeCgroupDir,
  procsBelow,
  type ResourceConfig,
  readNumber,
  readText,
  removeTree,
  subdirs,
  writeCgroupFile as write,
} from "./cgroup.ts";
import {
  cpuMaxText,
  limitText,
  parseFlatKeyed,
  parsePressure,
  sharesToWeightLinear,
} from "./convert.ts";

export interface CgroupV2Options extends CgroupFsDeps {
  /** The cgroup2 mount point, e.g. /sys/fs/cgroup. */
  mountPoint: string;
}

/** The controllers pod and QoS cgroups use. */
const WANTED = ["cpuset", "cpu", "memory", "pids"];

export function createCgroupV2(opts: CgroupV2Options): CgroupManager {
  const kill = opts.kill ?? ((pid, sig) => process.kill(pid, sig));
  const relativeName = createRelativeNames();
  const dirOf = (name: string) => join(opts.mountPoint, relativeName(name));
  let available: Set<string> | undefined;

  function controllers(): Set<string> {
    if (available === undefined) {
      const text = readText(join(opts.mountPoint, "cgroup.controllers")) ?? "";
      available = new Set(text.split(/\s+/).filter((c) => WANTED.includes(c)));
    }
    return available;
  }

  /** Enables the wanted controllers in the subtree_control of every ancestor of `name`. */
  function enableControllers(name: string): void {
    const ctls = controllers();
    if (ctls.size === 0) return;
    const parts = relativeName(name).split("/");
    for (let i = 0; i < parts.length; i++) {
      const file = join(opts.mountPoint, ...parts.slice(0, i), "cgroup.subtree_control");
      const enabled = new Set((readText(file) ?? "").split(/\s+/));
      const missing = WANTED.filter((c) => ctls.has(c) && !enabled.has(c));
      if (missing.length > 0) write(file, missing.map((c) => `+${c}`).join(" "));
    }
  }

  function apply(name: string, c: ResourceConfig): void {
    const dir = dirOf(name);
    const ctls = controllers();
    if (ctls.has("cpu")) {
      if (c.cpuShares !== undefined)
        write(join(dir, "cpu.weight"), String(sharesToWeightLinear(c.cpuShares)));
      if (c.cpuQuota !== undefined || c.cpuPeriod !== undefined)
        write(join(dir, "cpu.max"), cpuMaxText(c.cpuQuota, c.cpuPeriod));
    }
    if (ctls.has("memory") && c.memory !== undefined)
      write(join(dir, "memory.max"), limitText(c.memory));
    if (ctls.has("pids") && c.pidsLimit !== undefined)
      write(join(dir, "pids.max"), limitText(c.pidsLimit));
    if (ctls.has("cpuset") && c.cpusetCpus !== undefined)
      write(join(dir, "cpuset.cpus"), c.cpusetCpus);
  }

  function pressure(dir: string): CgroupStats["pressure"] {
    const out: NonNullable<CgroupStats["pressure"]> = {};
    for (const kind of ["cpu", "memory", "io"] as const) {
      const text = readText(join(dir, `${kind}.pressure`));
      const some = text === undefined ? undefined : parsePressure(text).some;
      if (some !== undefined) out[kind] = some.avg10;
    }
    return Object.keys(out).length > 0 ? out : undefined;
  }

  return {
    version: 2,
    paths: (name) => [dirOf(name)],

    async exists(name) {
      return existsSync(dirOf(name));
    },

    async create(name, config) {
      makeCgroupDir(dirOf(name));
      enableControllers(name);
      apply(name, config);
    },

    async update(name, config) {
      apply(name, config);
    },

    async stats(name) {
      const dir = dirOf(name);
      const out: CgroupStats = { memoryUsageBytes: readNumber(join(dir, "memory.current")) };
      const stat = readText(join(dir, "cpu.stat"));
      if (stat !== undefined) {
        const m = parseFlatKeyed(stat);
        const usec = (k: string) => {
          const v = m.get(k);
          return v === undefined ? undefined : v * 1000;
        };
        out.cpuUsageNanos = usec("usage_usec");
        out.nrPeriods = m.get("nr_periods");
        out.nrThrottled = m.get("nr_throttled");
        out.throttledNanos = usec("throttled_usec");
      }
      out.pids = readNumber(join(dir, "pids.current"));
      const psi = pressure(dir);
      if (psi !== undefined) out.pressure = psi;
      return out;
    },

    async pids(name) {
      return procsBelow(dirOf(name));
    },

    async kill(name) {
      const file = join(dirOf(name), "cgroup.kill");
      if (existsSync(file)) write(file, "1");
      await killAll(() => procsBelow(dirOf(name)), kill);
    },

    async destroy(name) {
      removeTree(dirOf(name));
    },

    async children(name) {
      return subdirs(dirOf(name));
    },
  };
}
