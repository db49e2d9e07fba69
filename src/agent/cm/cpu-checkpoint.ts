// The CPU manager's checkpoint file: its state as JSON with an FNV-1a checksum of the rest, written
// atomically (temp file, then rename). A file that does not parse, fails its checksum or holds
// bad CPU sets is refused: the agent must not guess which CPUs its running pods own.

import { readFileSync } from "node:fs";
import { writeFileAtomic } from "../../util/atomic-file.ts";
import type { CpuManagerState, CpuPolicyName } from "./cpu-static.ts";
import { formatCpuSet, parseCpuSet } from "./cpuset.ts";

class CpuCheckpointError extends Error {
  constructor(
    readonly path: string,
    why: string,
  ) {
    super(
      `CPU manager checkpoint ${path} is corrupt (${why}): stop this node's pods and delete the file before starting the agent again`,
    );
    this.name = "CpuCheckpointError";
  }
}

interface OnDisk {
  policyName: string;
  defaultCpuSet: string;
  entries: Record<string, Record<string, string>>;
  checksum?: number;
}

function fnv1a32(text: string): number {
  let h = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

function body(state: CpuManagerState): OnDisk {
  const entries: OnDisk["entries"] = {};
  for (const [uid, cs] of Object.entries(state.entries)) {
    entries[uid] = Object.fromEntries(Object.entries(cs).map(([n, s]) => [n, formatCpuSet(s)]));
  }
  return {
    policyName: state.policyName,
    defaultCpuSet: formatCpuSet(state.defaultCpuSet),
    entries,
  };
}

export function encodeCheckpoint(state: CpuManagerState): string {
  const b = body(state);
  return `${JSON.stringify({ ...b, checksum: fnv1a32(JSON.stringify(b)) })}\n`;
}

/** Parses a checkpoint's text; throws CpuCheckpointError naming what is wrong. */
export function decodeCheckpoint(path: string, text: string): CpuManagerState {
  let raw: OnDisk;
  try {
    raw = JSON.parse(text) as OnDisk;
  } catch {
    throw new CpuCheckpointError(path, "not JSON");
  }
  if (typeof raw !== "object" || raw === null || typeof raw.defaultCpuSet !== "string")
    throw new CpuCheckpointError(path, "no defaultCpuSet");
  if (raw.policyName !== "none" && raw.policyName !== "static")
    throw new CpuCheckpointError(path, `unknown policy ${JSON.stringify(raw.policyName)}`);
  const b: OnDisk = {
    policyName: raw.policyName,
    defaultCpuSet: raw.defaultCpuSet,
    entries: raw.entries ?? {},
  };
  if (raw.checksum !== fnv1a32(JSON.stringify(b)))
    throw new CpuCheckpointError(path, "checksum mismatch");
  try {
    const entries: CpuManagerState["entries"] = {};
    for (const [uid, cs] of Object.entries(b.entries)) {
      entries[uid] = Object.fromEntries(Object.entries(cs).map(([n, s]) => [n, parseCpuSet(s)]));
    }
    return {
      policyName: raw.policyName as CpuPolicyName,
      defaultCpuSet: parseCpuSet(b.defaultCpuSet),
      entries,
    };
  } catch (err) {
    throw new CpuCheckpointError(path, (err as Error).message);
  }
}

/** The state in `path`, or undefined when there is no file. */
export function readCheckpoint(path: string): CpuManagerState | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new Error(`Cannot read CPU manager checkpoint ${path}: ${(err as Error).message}`);
  }
  return decodeCheckpoint(path, text);
}

export function writeCheckpoint(path: string, state: CpuManagerState): void {
  writeFileAtomic(path, encodeCheckpoint(state), { mode: 0o644, dirMode: 0o755 });
}
