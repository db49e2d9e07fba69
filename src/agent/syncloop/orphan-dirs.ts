// Housekeeping of per-pod folders: a pod's folder under <rootDir>/pods/<uid> and its log folder
// <podLogsDir>/<namespace>_<name>_<uid> are removed once the pod is gone (no source wants it,
// the runtime has nothing of it, no worker is on it). Folders whose name does not follow the
// layout are left alone.
import { readdir, rm } from "node:fs/promises";
import { join } from "node:path";

/** The pod UID of a pod log folder's name, or undefined when it is not <ns>_<name>_<uid>. */
export function podUidOfLogDir(name: string): string | undefined {
  const parts = name.split("_");
  return parts.length === 3 && parts.every((p) => p !== "") ? parts[2] : undefined;
}

/** Removes the folders in `dir` whose pod (`uidOf` their name) `keep` does not want, with
 * `remove` (given the folder's name; default: removed with all it holds); resolves to the names
 * removed. A missing `dir` has nothing to remove; a folder that cannot be removed is passed to
 * `onError` and left for the next call. */
export async function removeOrphanDirs(
  dir: string,
  uidOf: (name: string) => string | undefined,
  keep: (uid: string) => boolean,
  opts: {
    remove?: (name: string) => Promise<unknown>;
    onError?: (name: string, error: unknown) => void;
  } = {},
): Promise<string[]> {
  const remove =
    opts.remove ?? ((name: string) => rm(join(dir, name), { recursive: true, force: true }));
  const names = await readdir(dir).catch(() => [] as string[]);
  const removed: string[] = [];
  for (const name of names) {
    const uid = uidOf(name);
    if (uid === undefined || keep(uid)) continue;
    try {
      await remove(name);
      removed.push(name);
    } catch (error) {
      opts.onError?.(name, error);
    }
  }
  return removed;
}
