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
  return new CgroupV1(opts);
}

class CgroupV1 implements CgroupManager {
  readonly version = 1;
  private readonly controllers: Map<string, string>;
  private readonly killPid: (pid: number, signal: NodeJS.Signals) => void;
  private readonly relativeName: (name: string) => string;
  readonly literalName: (name: string) => string;
  /** Every hierarchy's mount point (and the hybrid host's cgroup2 mount): a cgroup is in each. */
  private readonly mounts: string[];
  /** The hierarchy used to look a cgroup up and list its processes. */
  private readonly primary: string | undefined;

  constructor(opts: CgroupV1Options) {
    this.controllers = opts.controllers;
    this.killPid = opts.kill ?? ((pid, sig) => process.kill(pid, sig));
    this.literalName = opts.literalName ?? ((name) => name);
    this.relativeName = createRelativeNames(this.literalName);
    this.mounts = [...new Set(opts.controllers.values())];
    if (opts.unified !== undefined) this.mounts.push(opts.unified);
    this.primary = ["memory", "cpu", "pids"].find((c) => opts.controllers.has(c));
  }

  paths(name: string): string[] {
    return this.mounts.map((m) => join(m, this.relativeName(name)));
  }

  async exists(name: string): Promise<boolean> {
    return this.mounts.length > 0 && this.paths(name).every((dir) => existsSync(dir));
  }

  async create(name: string, config: ResourceConfig): Promise<void> {
    for (const dir of this.paths(name)) makeCgroupDir(dir);
    this.ensureCpuset(name);
    this.apply(name, config);
  }

  async update(name: string, config: ResourceConfig): Promise<void> {
    this.apply(name, config);
  }

  async stats(name: string): Promise<CgroupStats> {
    const out: CgroupStats = {};
    const memory = this.dirOf("memory", name);
    if (memory) out.memoryUsageBytes = readNumber(join(memory, "memory.usage_in_bytes"));
    const acct = this.dirOf("cpuacct", name);
    if (acct) out.cpuUsageNanos = readNumber(join(acct, "cpuacct.usage"));
    const cpu = this.dirOf("cpu", name);
    const stat = cpu ? readText(join(cpu, "cpu.stat")) : undefined;
    if (stat !== undefined) {
      const m = parseFlatKeyed(stat);
      out.nrPeriods = m.get("nr_periods");
      out.nrThrottled = m.get("nr_throttled");
      out.throttledNanos = m.get("throttled_time");
    }
    const pids = this.dirOf("pids", name);
    if (pids) out.pids = readNumber(join(pids, "pids.current"));
    return out;
  }

  async pids(name: string): Promise<number[]> {
    return this.pidsOf(name);
  }

  async kill(name: string): Promise<void> {
    await killAll(() => this.pidsOf(name), this.killPid);
  }

  async destroy(name: string): Promise<void> {
    for (const dir of this.paths(name)) removeTree(dir);
  }

  async children(name: string): Promise<string[]> {
    return this.primary ? subdirs(this.dirOf(this.primary, name) ?? "") : [];
  }

  /** The cgroup's directory in the controller's hierarchy; undefined when it is not mounted. */
  private dirOf(controller: string, name: string): string | undefined {
    const mount = this.controllers.get(controller);
    return mount === undefined ? undefined : join(mount, this.relativeName(name));
  }

  private pidsOf(name: string): number[] {
    return this.primary ? procsBelow(this.dirOf(this.primary, name) ?? "") : [];
  }

  /** Copies cpuset.cpus and cpuset.mems from the parent wherever they are empty. */
  private ensureCpuset(name: string): void {
    const mount = this.controllers.get("cpuset");
    if (mount === undefined) return;
    const parts = this.relativeName(name).split("/");
    for (let i = 1; i <= parts.length; i++) {
      const dir = join(mount, ...parts.slice(0, i));
      for (const file of ["cpuset.cpus", "cpuset.mems"]) {
        if ((readText(join(dir, file)) ?? "").trim() !== "") continue;
        const parent = (readText(join(dirname(dir), file)) ?? "").trim();
        write(join(dir, file), parent);
      }
    }
  }

  /** Writes the limits of `c` that are set, in the hierarchies that are mounted. */
  private apply(name: string, c: ResourceConfig): void {
    const cpu = this.dirOf("cpu", name);
    if (cpu !== undefined) {
      if (c.cpuShares !== undefined) write(join(cpu, "cpu.shares"), String(c.cpuShares));
      if (c.cpuPeriod !== undefined && c.cpuPeriod > 0)
        write(join(cpu, "cpu.cfs_period_us"), String(c.cpuPeriod));
      if (c.cpuQuota !== undefined)
        write(join(cpu, "cpu.cfs_quota_us"), String(c.cpuQuota > 0 ? c.cpuQuota : -1));
    }
    const memory = this.dirOf("memory", name);
    if (memory !== undefined && c.memory !== undefined)
      write(join(memory, "memory.limit_in_bytes"), String(c.memory > 0 ? c.memory : -1));
    const pids = this.dirOf("pids", name);
    if (pids !== undefined && c.pidsLimit !== undefined)
      write(join(pids, "pids.max"), c.pidsLimit > 0 ? String(c.pidsLimit) : "max");
    const cpuset = this.dirOf("cpuset", name);
    if (cpuset !== undefined && c.cpusetCpus !== undefined)
      write(join(cpuset, "cpuset.cpus"), c.cpusetCpus);
  }
}
