// One scan of a host device group: expands its path patterns over the file system, resolves
// each match to the node it names (stable names such as /dev/serial/by-id/usb-… are symlinks),
// keeps character and block devices, and notes the folders whose entries decided the matches,
// for the group's watches.
//
// Invariants: a device node (kind and rdev) appears once in a scan's devices, under the first
// pattern (in config order) and the first name (sorted) that reach it; a scan never throws (a
// path it cannot read is skipped and reported in `problems`).
import { type FSWatcher, watch as fsWatch } from "node:fs";
import { readdir, realpath, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { compilePattern, type PatternSegment } from "../../../util/device-glob.ts";

/** The part of a file's status a scan reads (node's fs.Stats has it). */
export interface HostDeviceStat {
  isCharacterDevice(): boolean;
  isBlockDevice(): boolean;
  isDirectory(): boolean;
  rdev: number;
  ino: number;
}

/** The file system as host devices use it; tests replace parts (stat, to fake device nodes). */
export interface HostDeviceFs {
  /** The names in folder `dir`. */
  readdir(dir: string): Promise<string[]>;
  /** `path` with every symlink resolved. */
  realpath(path: string): Promise<string>;
  /** The status of `path`, symlinks followed. */
  stat(path: string): Promise<HostDeviceStat>;
  /** Calls `onChange` when an entry of folder `dir` changes, `onError` once if the watch dies
   * (the folder was removed); returns the function that stops it. Throws if it cannot watch. */
  watch(dir: string, onChange: () => void, onError: (error: Error) => void): () => void;
}

export const nodeHostDeviceFs: HostDeviceFs = {
  readdir: (dir) => readdir(dir),
  realpath: (path) => realpath(path),
  stat: (path) => stat(path),
  watch(dir, onChange, onError) {
    const watcher: FSWatcher = fsWatch(dir, { persistent: false }, onChange);
    watcher.on("error", onError);
    return () => watcher.close();
  },
};

/** One device node a scan found. */
export interface HostDevice {
  /** The name that matched: where the container sees the node. */
  path: string;
  /** The node itself, symlinks resolved. */
  hostPath: string;
}

export interface HostDeviceScan {
  /** In config order, then by name. */
  devices: HostDevice[];
  /** The folders whose entries decided the matches, each with its inode (a folder removed and
   * made again is a new one to watch); for a folder that does not exist, its nearest existing
   * parent. */
  folders: Map<string, number>;
  /** Whether a folder a pattern names does not exist (yet): only a rescan or a watch of a
   * parent will see it appear. */
  missing: boolean;
  /** Paths that could not be read, other than missing ones ("/dev/x: EACCES ..."). */
  problems: string[];
}

/** Scans `patterns` (checked by hostDevicePatternProblem) once. */
export async function scanHostDevices(
  patterns: readonly string[],
  fs: HostDeviceFs,
): Promise<HostDeviceScan> {
  const scan: HostDeviceScan = { devices: [], folders: new Map(), missing: false, problems: [] };
  const seen = new Set<string>();
  for (const pattern of patterns) {
    for (const path of await expand(compilePattern(pattern), fs, scan)) {
      const node = await deviceNode(path, fs, scan);
      if (node === undefined || seen.has(node.key)) continue;
      seen.add(node.key);
      scan.devices.push({ path, hostPath: node.hostPath });
    }
  }
  return scan;
}

/** The paths a pattern names now, sorted level by level. Folders are noted where a wildcard is
 * matched against their entries, and for the last segment. */
async function expand(
  segments: PatternSegment[],
  fs: HostDeviceFs,
  scan: HostDeviceScan,
): Promise<string[]> {
  let paths = ["/"];
  for (const [i, segment] of segments.entries()) {
    const last = i === segments.length - 1;
    const next: string[] = [];
    for (const dir of paths) {
      if ("name" in segment) {
        if (!last || (await noteFolder(dir, fs, scan))) next.push(join(dir, segment.name));
        continue;
      }
      if (!(await noteFolder(dir, fs, scan))) continue;
      const names = await readNames(dir, fs, scan);
      for (const name of names.filter((n) => segment.glob.match(n)).sort())
        next.push(join(dir, name));
    }
    paths = next;
  }
  return paths;
}

/** Notes folder `dir` for watching; false when it is not there (then its nearest existing
 * parent is noted, and the scan is marked missing) or is not a folder. */
async function noteFolder(dir: string, fs: HostDeviceFs, scan: HostDeviceScan): Promise<boolean> {
  try {
    const status = await fs.stat(dir);
    if (status.isDirectory()) scan.folders.set(dir, status.ino);
    return status.isDirectory();
  } catch (err) {
    // A file where a folder should be (ENOTDIR) is nothing to wait for, nor is a folder that
    // cannot be read (reported).
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
      report(dir, err, scan);
      return false;
    }
  }
  scan.missing = true;
  for (let parent = dirname(dir); ; parent = dirname(parent)) {
    const up = await statOrWhy(parent, fs, scan);
    if (up?.isDirectory()) {
      scan.folders.set(parent, up.ino);
      return false;
    }
    if (parent === "/") return false;
  }
}

async function readNames(dir: string, fs: HostDeviceFs, scan: HostDeviceScan): Promise<string[]> {
  try {
    return await fs.readdir(dir);
  } catch (err) {
    report(dir, err, scan);
    return [];
  }
}

/** The node `path` names, keyed by kind and device number; undefined when it is not a
 * character or block device (or is gone). */
async function deviceNode(
  path: string,
  fs: HostDeviceFs,
  scan: HostDeviceScan,
): Promise<{ key: string; hostPath: string } | undefined> {
  let hostPath: string;
  try {
    hostPath = await fs.realpath(path);
  } catch (err) {
    report(path, err, scan);
    return undefined;
  }
  const status = await statOrWhy(hostPath, fs, scan);
  if (status?.isCharacterDevice()) return { key: `c:${status.rdev}`, hostPath };
  if (status?.isBlockDevice()) return { key: `b:${status.rdev}`, hostPath };
  return undefined;
}

async function statOrWhy(
  path: string,
  fs: HostDeviceFs,
  scan: HostDeviceScan,
): Promise<HostDeviceStat | undefined> {
  try {
    return await fs.stat(path);
  } catch (err) {
    report(path, err, scan);
    return undefined;
  }
}

/** Notes a failure worth telling: anything but a path that is not there (or not a folder). */
function report(path: string, err: unknown, scan: HostDeviceScan): void {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === "ENOENT" || code === "ENOTDIR") return;
  scan.problems.push(`${path}: ${(err as Error).message}`);
}
