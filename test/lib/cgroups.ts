// Host cgroup helpers for e2e tests: where a cgroup lives in each hierarchy, reading its files,
// and removing a test's whole cgroup tree afterwards (never touching anything outside it).
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { removeTree } from "../../src/agent/cm/cgroup.ts";

const CGROUP_FS = "/sys/fs/cgroup";

/** The directory of cgroup `name` in the v1 hierarchy `controller` (or "unified"). */
export function cgroupDir(controller: string, name: string): string {
  return join(CGROUP_FS, controller, name);
}

/** A cgroup file's trimmed text, or undefined when it does not exist. */
export function readCgroupFile(controller: string, name: string, file: string): string | undefined {
  try {
    return readFileSync(join(cgroupDir(controller, name), file), "utf8").trim();
  } catch {
    return undefined;
  }
}

/** Removes `root` (e.g. "/fleetlet-e2e-x") from every hierarchy; refuses "/" and short names. */
export async function removeCgroupRoot(root: string): Promise<void> {
  if (!/^\/fleetlet-[a-z0-9.-]+$/.test(root)) throw new Error(`refusing to remove cgroup ${root}`);
  for (const h of readdirSync(CGROUP_FS)) {
    try {
      removeTree(join(CGROUP_FS, h, root));
    } catch {
      // busy or gone: the next cleanup tries again
    }
  }
}
