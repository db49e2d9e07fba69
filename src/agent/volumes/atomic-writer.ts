// Writes a volume's files so that a reader never sees half an update, the way the kubelet's
// atomic writer does:
//
//   <dir>/..2024_05_01_10_00_00.Ab12Cd/   the files of one version (a new folder per update)
//   <dir>/..data -> ..2024_05_01_10_00_00.Ab12Cd
//   <dir>/<top-level name> -> ..data/<top-level name>   what containers open
//
// An update writes the new version's folder in full, points a new symlink at it and renames it
// over `..data` (rename is atomic), then removes top-level names that are gone and the previous
// folder. A reader that resolves `..data` gets the old version or the new one, whole. Names
// starting with ".." belong to the writer. Nothing is written when the content and modes are
// the same as on disk. With the pod's fsGroup, everything written gets it (ownership.ts).

import {
  chmod,
  lstat,
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  readlink,
  rename,
  rm,
  symlink,
  unlink,
  writeFile,
} from "node:fs/promises";
import { dirname, join } from "node:path";
import { applyFsGroup, fsGroupMode } from "./ownership.ts";
import { missingAsUndefined } from "./paths.ts";
import type { Payload } from "./payload.ts";

const DATA_DIR = "..data";
const NEW_DATA_DIR = "..data_tmp";
const MAX_FILE_NAME = 255;
const MAX_PATH = 4096;

/** Why a payload path cannot be written (undefined: it can). */
function invalidPayloadPath(p: string): string | undefined {
  if (p === "") return "invalid path: must not be empty";
  if (p.startsWith("/")) return `invalid path: must be relative path: ${p}`;
  if (p.length > MAX_PATH)
    return `invalid path: must be less than or equal to ${MAX_PATH} characters`;
  const parts = p.split("/");
  if (parts.includes("..")) return `invalid path: must not contain '..': ${p}`;
  if (parts.some((s) => s.length > MAX_FILE_NAME))
    return `invalid path: filenames must be less than or equal to ${MAX_FILE_NAME} characters`;
  if ((parts[0] ?? "").startsWith("..")) return `invalid path: must not start with '..': ${p}`;
  return undefined;
}

/** "..2006_01_02_15_04_05." in UTC: the prefix of a version folder. */
function versionPrefix(now: Date): string {
  const pad = (n: number) => String(n).padStart(2, "0");
  const d = now;
  return `..${d.getUTCFullYear()}_${pad(d.getUTCMonth() + 1)}_${pad(d.getUTCDate())}_${pad(d.getUTCHours())}_${pad(d.getUTCMinutes())}_${pad(d.getUTCSeconds())}.`;
}

/** Every path under `dir`, relative, files and folders (empty when `dir` is missing). */
async function walk(dir: string, prefix = ""): Promise<string[]> {
  let entries: import("node:fs").Dirent[];
  try {
    entries = await readdir(join(dir, prefix), { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
  const out: string[] = [];
  for (const e of entries) {
    const rel = prefix === "" ? e.name : `${prefix}/${e.name}`;
    out.push(rel);
    if (e.isDirectory()) out.push(...(await walk(dir, rel)));
  }
  return out;
}

/** A file's mode on disk: the payload's, with the fsGroup's group read when there is one. */
function modeOnDisk(mode: number, fsGroup: number | undefined): number {
  return fsGroup === undefined ? mode : fsGroupMode(mode, false, true);
}

/** Whether the version in `oldDir` holds exactly the payload's files, bytes, modes and group. */
async function sameContent(
  payload: Payload,
  oldDir: string,
  fsGroup: number | undefined,
): Promise<boolean> {
  for (const [path, file] of payload) {
    const info = await lstat(join(oldDir, path)).catch(missingAsUndefined);
    if (!info?.isFile() || (info.mode & 0o7777) !== modeOnDisk(file.mode, fsGroup)) return false;
    if (fsGroup !== undefined && info.gid !== fsGroup) return false;
    if (!(await readFile(join(oldDir, path))).equals(file.data)) return false;
  }
  return true;
}

/** Paths of the old version that the payload no longer has (its files' folders are kept). */
function pathsToRemove(payload: Payload, old: string[]): string[] {
  const keep = new Set<string>();
  for (const path of payload.keys()) {
    for (let p = path; p !== "."; p = dirname(p)) keep.add(p);
  }
  return old.filter((p) => !keep.has(p));
}

function readDataLink(dir: string): Promise<string | undefined> {
  return readlink(join(dir, DATA_DIR)).catch(missingAsUndefined);
}

async function exists(path: string): Promise<boolean> {
  return (await lstat(path).catch(missingAsUndefined)) !== undefined;
}

/**
 * Projects `payload` into `dir` (which must exist) atomically, everything in the pod's `fsGroup`
 * when it has one; returns whether anything was written. Throws naming what failed; a failed
 * update leaves the previous version in place.
 */
export async function writeAtomically(
  dir: string,
  payload: Payload,
  now: Date,
  fsGroup?: number,
): Promise<boolean> {
  for (const path of payload.keys()) {
    const bad = invalidPayloadPath(path);
    if (bad !== undefined) throw new Error(bad);
  }
  const oldName = await readDataLink(dir);
  let remove: string[] = [];
  if (oldName !== undefined) {
    // The previous version's folder is found through `..data`, and removed after the swap.
    const oldDir = join(dir, oldName);
    const old = await walk(oldDir);
    remove = pathsToRemove(payload, old);
    if (remove.length === 0 && (await sameContent(payload, oldDir, fsGroup))) return false;
  }
  const versionDir = await mkdtemp(join(dir, versionPrefix(now)));
  try {
    await chmod(versionDir, 0o755);
    for (const [path, file] of payload) {
      const full = join(versionDir, path);
      await mkdir(dirname(full), { recursive: true, mode: 0o755 });
      await writeFile(full, file.data, { mode: file.mode });
      await chmod(full, file.mode);
    }
    const tops = new Set([...payload.keys()].map((p) => p.split("/")[0] as string));
    for (const top of tops) {
      if (!(await exists(join(dir, top)))) await symlink(join(DATA_DIR, top), join(dir, top));
    }
    const tmpLink = join(dir, NEW_DATA_DIR);
    await rm(tmpLink, { force: true });
    await symlink(versionDir.slice(dir.length + 1), tmpLink);
    if (fsGroup !== undefined) {
      for (const p of ["", ...(await walk(versionDir))])
        await applyFsGroup(join(versionDir, p), fsGroup, true);
      for (const p of [...tops, NEW_DATA_DIR]) await applyFsGroup(join(dir, p), fsGroup, true);
    }
    await rename(tmpLink, join(dir, DATA_DIR));
  } catch (err) {
    await rm(versionDir, { recursive: true, force: true });
    throw err;
  }
  for (const p of remove)
    if (!p.includes("/")) await unlink(join(dir, p)).catch(missingAsUndefined);
  // The previous version, and any left by a write that was cut short (an agent stopped in it).
  const current = versionDir.slice(dir.length + 1);
  for (const name of await readdir(dir)) {
    if (name.startsWith("..") && name !== DATA_DIR && name !== current)
      await rm(join(dir, name), { recursive: true, force: true });
  }
  return true;
}
