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
  return new CgroupV2(opts);
}

class CgroupV2 implements CgroupManager {
  readonly version = 2;
  private readonly mountPoint: string;
  private readonly killPid: (pid: number, signal: NodeJS.Signals) => void;
  private readonly relativeName: (name: string) => string;
  readonly literalName: (name: string) => string;
  /** The wanted controllers the root offers; read once, on first use. */
  private available: Set<string> | undefined;

  constructor(opts: CgroupV2Options) {
    this.mountPoint = opts.mountPoint;
    this.killPid = opts.kill ?? ((pid, sig) => process.kill(pid, sig));
    this.literalName = opts.literalName ?? ((name) => name);
    this.relativeName = createRelativeNames(this.literalName);
  }

  paths(name: string): string[] {
    return [this.dirOf(name)];
  }

  async exists(name: string): Promise<boolean> {
    return existsSync(this.dirOf(name));
  }

  async create(name: string, config: ResourceConfig): Promise<void> {
    makeCgroupDir(this.dirOf(name));
    this.enableControllers(name);
    this.apply(name, config);
  }

  async update(name: string, config: ResourceConfig): Promise<void> {
    this.apply(name, config);
  }

  async stats(name: string): Promise<CgroupStats> {
    const dir = this.dirOf(name);
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
  }

  async pids(name: string): Promise<number[]> {
    return procsBelow(this.dirOf(name));
  }

  async kill(name: string): Promise<void> {
    const file = join(this.dirOf(name), "cgroup.kill");
    if (existsSync(file)) write(file, "1");
    await killAll(() => procsBelow(this.dirOf(name)), this.killPid);
  }

  async destroy(name: string): Promise<void> {
    removeTree(this.dirOf(name));
  }

  async children(name: string): Promise<string[]> {
    return subdirs(this.dirOf(name));
  }

  private dirOf(name: string): string {
    return join(this.mountPoint, this.relativeName(name));
  }

  private controllers(): Set<string> {
    if (this.available === undefined) {
      const text = readText(join(this.mountPoint, "cgroup.controllers")) ?? "";
      this.available = new Set(text.split(/\s+/).filter((c) => WANTED.includes(c)));
    }
    return this.available;
  }

  /** Enables the wanted controllers in the subtree_control of every ancestor of `name`. */
  private enableControllers(name: string): void {
    const ctls = this.controllers();
    if (ctls.size === 0) return;
    const parts = this.relativeName(name).split("/");
    for (let i = 0; i < parts.length; i++) {
      const file = join(this.mountPoint, ...parts.slice(0, i), "cgroup.subtree_control");
      const enabled = new Set((readText(file) ?? "").split(/\s+/));
      const missing = WANTED.filter((c) => ctls.has(c) && !enabled.has(c));
      if (missing.length > 0) write(file, missing.map((c) => `+${c}`).join(" "));
    }
  }

  /** Writes the limits of `c` that are set, for the controllers that are enabled. */
  private apply(name: string, c: ResourceConfig): void {
    const dir = this.dirOf(name);
    const ctls = this.controllers();
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
}

/** The some-avg10 of each pressure file the cgroup has; undefined when it has none. */
function pressure(dir: string): CgroupStats["pressure"] {
  const out: NonNullable<CgroupStats["pressure"]> = {};
  for (const kind of ["cpu", "memory", "io"] as const) {
    const text = readText(join(dir, `${kind}.pressure`));
    const some = text === undefined ? undefined : parsePressure(text).some;
    if (some !== undefined) out[kind] = some.avg10;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}
