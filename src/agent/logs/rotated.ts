// The kubelet's names for rotated container logs (docs/runtime-contract.md):
//   <restartCount>.log                      the current file, written by the runtime
//   <restartCount>.log.<YYYYMMDD-hhmmss>    the newest rotated file, uncompressed
//   <restartCount>.log.<YYYYMMDD-hhmmss>.gz older rotated files
//   <name>.tmp                              a file being compressed (or left by a crash)
// The timestamp is the local time of the rotation, so the names sort oldest first.
import { readdir, rm, stat } from "node:fs/promises";
import { basename, dirname, join } from "node:path";

export const COMPRESSED_SUFFIX = ".gz";
const TMP_SUFFIX = ".tmp";

const pad = (n: number, width = 2) => String(n).padStart(width, "0");

/** The suffix of a log rotated at `ms`: Go's "20060102-150405" in local time. */
export function rotationStamp(ms: number): string {
  const d = new Date(ms);
  const date = `${pad(d.getFullYear(), 4)}${pad(d.getMonth() + 1)}${pad(d.getDate())}`;
  return `${date}-${pad(d.getHours())}${pad(d.getMinutes())}${pad(d.getSeconds())}`;
}

/** The name `logPath` is renamed to when it is rotated at `ms`. */
export function rotatedPath(logPath: string, ms: number): string {
  return `${logPath}.${rotationStamp(ms)}`;
}

/** Every file of the container log `logPath` besides the current one (rotated, compressed or
 * temporary), as full paths sorted by name: oldest first. Empty when the folder is missing. */
export async function rotatedFiles(logPath: string): Promise<string[]> {
  const prefix = `${basename(logPath)}.`;
  const dir = dirname(logPath);
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  return names
    .filter((n) => n.startsWith(prefix))
    .sort()
    .map((n) => join(dir, n));
}

/** The rotated files a reader can read, oldest first: no temporary files, and a file that is
 * both compressed and not (a compression that has not removed the original yet) once. */
export async function readableRotatedFiles(logPath: string): Promise<string[]> {
  const all = await rotatedFiles(logPath);
  const plain = new Set(all.filter((p) => !p.endsWith(COMPRESSED_SUFFIX)));
  return all.filter(
    (p) =>
      !p.endsWith(TMP_SUFFIX) &&
      !(p.endsWith(COMPRESSED_SUFFIX) && plain.has(p.slice(0, -COMPRESSED_SUFFIX.length))),
  );
}

/** Removes the container log `logPath` and its rotated files; resolves to the bytes removed. */
export async function removeContainerLogs(logPath: string): Promise<number> {
  let bytes = 0;
  for (const path of [logPath, ...(await rotatedFiles(logPath))]) {
    try {
      bytes += (await stat(path)).size;
    } catch {
      continue;
    }
    await rm(path, { force: true });
  }
  return bytes;
}
