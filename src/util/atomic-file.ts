// Files that must never be seen half-written (credentials, checkpoints, the hub outbox).
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, writeSync } from "node:fs";
import { dirname } from "node:path";

export interface AtomicWriteOptions {
  /** Mode of the file (default 0600). */
  mode?: number;
  /** Mode of parent folders this call creates (default 0700). */
  dirMode?: number;
}

/** Writes `text` to `path` through a temp file, fsync and rename; creates the parent folder. */
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
}
