// The machine's CPUs: id, core and socket, read from sysfs (online CPUs only).
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { type CpuSet, parseCpuSet } from "./cpuset.ts";

interface CpuInfo {
  id: number;
  /** Core id, unique within the socket. */
  core: number;
  socket: number;
}

export interface CpuTopology {
  cpus: readonly CpuInfo[];
}

export const allCpus = (t: CpuTopology): CpuSet => t.cpus.map((c) => c.id).sort((a, b) => a - b);

async function readInt(path: string, fallback: number): Promise<number> {
  try {
    const n = Number((await readFile(path, "utf8")).trim());
    return Number.isInteger(n) ? n : fallback;
  } catch {
    return fallback;
  }
}

/** Reads <sysfs>/online and each CPU's topology/core_id and physical_package_id. */
export async function readCpuTopology(sysfs = "/sys/devices/system/cpu"): Promise<CpuTopology> {
  const online = parseCpuSet(await readFile(join(sysfs, "online"), "utf8"));
  const cpus: CpuInfo[] = [];
  for (const id of online) {
    const dir = join(sysfs, `cpu${id}`, "topology");
    cpus.push({
      id,
      core: await readInt(join(dir, "core_id"), id),
      socket: await readInt(join(dir, "physical_package_id"), 0),
    });
  }
  return { cpus };
}
