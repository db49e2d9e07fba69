// Files that must never be seen half-written (credentials, checkpoints, the hub outbox).
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, writeSync } from "node:fs";
import { dirname } from "node:path";

export interface AtomicWriteOptions {
  /** Mode of the file (default 0600). */
  mode?: number;
  /** Mode of parent folders this call creates (default 0700). */
  dirMode?: number;
}

/**
 * Writes `text` to `path` through a temp file, fsync and rename, then fsyncs the folder so that
 * the rename itself survives a power cut (without it ext4 may come back with the old file, or
 * none); creates the parent folder.
 */
export function writeFileAtomic(path: string, text: string, opts: AtomicWriteOptions = {}): void {
  mkdirSync(dirname(path), { recursive: true, mode: opts.dirMode ?? 0o700 });
  const tmp = `${path}.tmp`;
  const fd = openSync(tmp, "w", opts.mode ?? 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  syncFolder(dirname(path));
}

/** fsync of a folder; where the platform refuses it (EISDIR, EINVAL) there is nothing to do. */
function syncFolder(dir: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(dir, "r");
    fsyncSync(fd);
  } catch {
    // not supported here
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
