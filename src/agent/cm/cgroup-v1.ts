// The cgroup v1 driver (cgroupfs): a cgroup is the same relative path in every mounted
// hierarchy. Limits go to cpu (cpu.shares, cpu.cfs_period_us, cpu.cfs_quota_us), memory
// (memory.limit_in_bytes), pids (pids.max) and cpuset (cpuset.cpus). A new cpuset cgroup starts
// with empty cpus/mems, which no task may join, so they are copied from the parent.
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
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
import { parseFlatKeyed } from "./convert.ts";

export interface CgroupV1Options extends CgroupFsDeps {
  /** Controller (or "name=systemd") → mount point, from detectCgroupLayout(). */
  controllers: Map<string, string>;
  /** A hybrid host's cgroup2 mount: the cgroup is made and removed there too. */
  unified?: string;
}

export function createCgroupV1(opts: CgroupV1Options): CgroupManager {
  const kill = opts.kill ?? ((pid, sig) => process.kill(pid, sig));
  const relativeName = createRelativeNames();
  const mounts = [...new Set(opts.controllers.values())];
  if (opts.unified !== undefined) mounts.push(opts.unified);
  const dirOf = (controller: string, name: string): string | undefined => {
    const mount = opts.controllers.get(controller);
    return mount === undefined ? undefined : join(mount, relativeName(name));
  };
  // The hierarchy used to look a cgroup up and list its processes.
  const primary = ["memory", "cpu", "pids"].find((c) => opts.controllers.has(c));
  const paths = (name: string) => mounts.map((m) => join(m, relativeName(name)));
  const pidsOf = (name: string) => (primary ? procsBelow(dirOf(primary, name) ?? "") : []);

  function ensureCpuset(name: string): void {
    const mount = opts.controllers.get("cpuset");
    if (mount === undefined) return;
    const parts = relativeName(name).split("/");
    for (let i = 1; i <= parts.length; i++) {
      const dir = join(mount, ...parts.slice(0, i));
      for (const file of ["cpuset.cpus", "cpuset.mems"]) {
        if ((readText(join(dir, file)) ?? "").trim() !== "") continue;
        const parent = (readText(join(dirname(dir), file)) ?? "").trim();
        write(join(dir, file), parent);
      }
    }
  }

  function apply(name: string, c: ResourceConfig): void {
    const cpu = dirOf("cpu", name);
    if (cpu !== undefined) {
      if (c.cpuShares !== undefined) write(join(cpu, "cpu.shares"), String(c.cpuShares));
      if (c.cpuPeriod !== undefined && c.cpuPeriod > 0)
        write(join(cpu, "cpu.cfs_period_us"), String(c.cpuPeriod));
      if (c.cpuQuota !== undefined)
        write(join(cpu, "cpu.cfs_quota_us"), String(c.cpuQuota > 0 ? c.cpuQuota : -1));
    }
    const memory = dirOf("memory", name);
    if (memory !== undefined && c.memory !== undefined)
      write(join(memory, "memory.limit_in_bytes"), String(c.memory > 0 ? c.memory : -1));
    const pids = dirOf("pids", name);
    if (pids !== undefined && c.pidsLimit !== undefined)
      write(join(pids, "pids.max"), c.pidsLimit > 0 ? String(c.pidsLimit) : "max");
    const cpuset = dirOf("cpuset", name);
    if (cpuset !== undefined && c.cpusetCpus !== undefined)
      write(join(cpuset, "cpuset.cpus"), c.cpusetCpus);
  }

  return {
    version: 1,
    paths,

    async exists(name) {
      return mounts.length > 0 && paths(name).every((dir) => existsSync(dir));
    },

    async create(name, config) {
      for (const dir of paths(name)) makeCgroupDir(dir);
      ensureCpuset(name);
      apply(name, config);
    },

    async update(name, config) {
      apply(name, config);
    },

    async stats(name) {
      const out: CgroupStats = {};
      const memory = dirOf("memory", name);
      if (memory) out.memoryUsageBytes = readNumber(join(memory, "memory.usage_in_bytes"));
      const acct = dirOf("cpuacct", name);
      if (acct) out.cpuUsageNanos = readNumber(join(acct, "cpuacct.usage"));
      const cpu = dirOf("cpu", name);
      const stat = cpu ? readText(join(cpu, "cpu.stat")) : undefined;
      if (stat !== undefined) {
        const m = parseFlatKeyed(stat);
        out.nrPeriods = m.get("nr_periods");
        out.nrThrottled = m.get("nr_throttled");
        out.throttledNanos = m.get("throttled_time");
      }
      const pids = dirOf("pids", name);
      if (pids) out.pids = readNumber(join(pids, "pids.current"));
      return out;
    },

    async pids(name) {
      return pidsOf(name);
    },

    async kill(name) {
      await killAll(() => pidsOf(name), kill);
    },

    async destroy(name) {
      for (const dir of paths(name)) removeTree(dir);
    },

    async children(name) {
      return primary ? subdirs(dirOf(primary, name) ?? "") : [];
    },
  };
}
