// The device's side of the agent's versions (docs/agent-updates.md): the folder the launcher
// (deploy/fleetlet-launch) reads, a verified executable installed as a new version, and the
// trial opened on it. Every step is durable before the next, in the order the launcher relies
// on: the executable, then `trial`, then `previous` ← `current`, then `current` ← the new one.
// A power cut between any two steps leaves a device whose launcher runs a working version.
import { chmodSync, mkdirSync, readlinkSync, renameSync, rmSync, symlinkSync } from "node:fs";
import { basename, join } from "node:path";
import { versionProblem } from "../../release/manifest.ts";
import { fsyncFolder, writeFileAtomic } from "../../util/atomic-file.ts";
import { testPause } from "./test-pause.ts";

/** The launcher's state folder under the agent's root dir. */
export function updateDir(rootDir: string): string {
  return join(rootDir, "agent");
}

/** A version's folder name: its version and the first 12 hex digits of its sha256. */
export function versionName(version: string, sha256: string): string {
  const problem = versionProblem(version);
  if (problem !== undefined) throw new Error(`release ${problem}`);
  if (!/^[0-9a-f]{64}$/.test(sha256))
    throw new Error(`release sha256 ${JSON.stringify(sha256)} is not 64 hex digits`);
  return `${version}-${sha256.slice(0, 12)}`;
}

/** The version folder `link` ("current", "previous") names, or undefined. */
export function linkedVersion(dir: string, link: "current" | "previous"): string | undefined {
  try {
    return basename(readlinkSync(join(dir, link)));
  } catch {
    return undefined;
  }
}

/** Points `link` in `dir` at `target` in one rename, durably. */
function point(dir: string, link: string, target: string): void {
  const tmp = join(dir, `${link}.tmp`);
  rmSync(tmp, { force: true });
  symlinkSync(target, tmp);
  renameSync(tmp, join(dir, link));
  fsyncFolder(dir);
}

/**
 * Installs `executable` (verified, fsynced, on the same file system as `dir`; it is moved) as
 * version `name` and opens its trial; the launcher runs it at the agent's next start. Without
 * `executable`, the version's folder holds it already (verified: an earlier try was cut).
 */
export function installVersion(dir: string, name: string, executable?: string): void {
  const folder = join(dir, "versions", name);
  if (executable !== undefined) {
    mkdirSync(folder, { recursive: true, mode: 0o755 });
    chmodSync(executable, 0o755);
    renameSync(executable, join(folder, "fleetlet"));
    fsyncFolder(folder);
    fsyncFolder(join(dir, "versions"));
  }
  testPause("executable");
  writeFileAtomic(join(dir, "trial"), `${name} 0\n`, { mode: 0o644 });
  testPause("trial");
  const current = linkedVersion(dir, "current");
  if (current !== undefined && current !== name) {
    point(dir, "previous", `versions/${current}`);
    testPause("previous");
  }
  point(dir, "current", `versions/${name}`);
  testPause("current");
}
