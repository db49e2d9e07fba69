// The desired state the hub pushes (docs/protocol.md, "Desired state"): saved atomically to
// <rootDir>/hub/desired.json before its generation is acknowledged. Applying it as a pod source
// is a later step; today it is only kept.
import { readFileSync } from "node:fs";
import type { Pod } from "../../api/types.ts";
import { writeFileAtomic } from "../../util/atomic-file.ts";

export interface DesiredState {
  generation: number;
  pods: Pod[];
}

/** Saves the desired state (temp file, fsync, rename); throws naming the file on failure. */
export function saveDesired(path: string, desired: DesiredState): void {
  try {
    writeFileAtomic(path, `${JSON.stringify(desired)}\n`);
  } catch (err) {
    throw new Error(`cannot save the hub's desired state to ${path}: ${(err as Error).message}`);
  }
}

/** The generation saved in `path`; 0 when nothing (readable) is saved. */
export function savedGeneration(path: string): number {
  try {
    const g = (JSON.parse(readFileSync(path, "utf8")) as { generation?: unknown }).generation;
    return typeof g === "number" && Number.isInteger(g) && g >= 0 ? g : 0;
  } catch {
    return 0;
  }
}
