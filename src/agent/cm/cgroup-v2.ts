// The cgroup v2 driver (cgroupfs on the unified hierarchy): one directory per cgroup. The
// controllers the root offers (cgroup.controllers) are enabled down the path through each
// parent's cgroup.subtree_control; limits are written only for enabled controllers: cpu.weight
// (kubelet's linear conversion of shares), cpu.max, memory.max, pids.max, cpuset.cpus.
import { access, mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  type CgroupFsDeps,
  type CgroupManager,
  type CgroupStats,
  killAll,
  procsBelow,
  type ResourceConfig,
  readNumber,
  readText,
  relativeName,
  removeTree,
  subdirs,
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

async function write(path: string, value: string): Promise<void> {
  try {
    await writeFile(path, value);
  } catch (err) {
    throw new Error(`Cannot write ${JSON.stringify(value)} to ${path}: ${(err as Error).message}`);
  }
}

export function createCgroupV2(opts: CgroupV2Options): CgroupManager {
  const kill = opts.kill ?? ((pid, sig) => process.kill(pid, sig));
  const dirOf = (name: string) => join(opts.mountPoint, relativeName(name));
  let available: Set<string> | undefined;

  async function controllers(): Promise<Set<string>> {
    if (available === undefined) {
      const text = (await readText(join(opts.mountPoint, "cgroup.controllers"))) ?? "";
      available = new Set(text.split(/\s+/).filter((c) => WANTED.includes(c)));
    }
    return available;
  }

  /** Enables the wanted controllers in the subtree_control of every ancestor of `name`. */
  async function enableControllers(name: string): Promise<void> {
    const ctls = await controllers();
    if (ctls.size === 0) return;
    const parts = relativeName(name).split("/");
    for (let i = 0; i < parts.length; i++) {
      const file = join(opts.mountPoint, ...parts.slice(0, i), "cgroup.subtree_control");
      const enabled = new Set(((await readText(file)) ?? "").split(/\s+/));
      const missing = WANTED.filter((c) => ctls.has(c) && !enabled.has(c));
      if (missing.length > 0) await write(file, missing.map((c) => `+${c}`).join(" "));
    }
  }

  async function apply(name: string, c: ResourceConfig): Promise<void> {
    const dir = dirOf(name);
    const ctls = await controllers();
    if (ctls.has("cpu")) {
      if (c.cpuShares !== undefined)
        await write(join(dir, "cpu.weight"), String(sharesToWeightLinear(c.cpuShares)));
      if (c.cpuQuota !== undefined || c.cpuPeriod !== undefined)
        await write(join(dir, "cpu.max"), cpuMaxText(c.cpuQuota, c.cpuPeriod));
    }
    if (ctls.has("memory") && c.memory !== undefined)
      await write(join(dir, "memory.max"), limitText(c.memory));
    if (ctls.has("pids") && c.pidsLimit !== undefined)
      await write(join(dir, "pids.max"), limitText(c.pidsLimit));
    if (ctls.has("cpuset") && c.cpusetCpus !== undefined)
      await write(join(dir, "cpuset.cpus"), c.cpusetCpus);
  }

  async function pressure(dir: string): Promise<CgroupStats["pressure"]> {
    const out: NonNullable<CgroupStats["pressure"]> = {};
    for (const kind of ["cpu", "memory", "io"] as const) {
      const text = await readText(join(dir, `${kind}.pressure`));
      const some = text === undefined ? undefined : parsePressure(text).some;
      if (some !== undefined) out[kind] = some.avg10;
    }
    return Object.keys(out).length > 0 ? out : undefined;
  }

  return {
    version: 2,
    paths: (name) => [dirOf(name)],

    exists: (name) =>
      access(dirOf(name)).then(
        () => true,
        () => false,
      ),

    async create(name, config) {
      try {
        await mkdir(dirOf(name), { recursive: true });
      } catch (err) {
        throw new Error(`Cannot create cgroup ${dirOf(name)}: ${(err as Error).message}`);
      }
      await enableControllers(name);
      await apply(name, config);
    },

    update: apply,

    async stats(name) {
      const dir = dirOf(name);
      const out: CgroupStats = { memoryUsageBytes: await readNumber(join(dir, "memory.current")) };
      const stat = await readText(join(dir, "cpu.stat"));
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
      out.pids = await readNumber(join(dir, "pids.current"));
      const psi = await pressure(dir);
      if (psi !== undefined) out.pressure = psi;
      return out;
    },

    pids: (name) => procsBelow(dirOf(name)),

    async kill(name) {
      const file = join(dirOf(name), "cgroup.kill");
      const hasKill = await access(file).then(
        () => true,
        () => false,
      );
      if (hasKill) await write(file, "1");
      await killAll(() => this.pids(name), kill);
    },

    destroy: (name) => removeTree(dirOf(name)),

    children: (name) => subdirs(dirOf(name)),
  };
}
