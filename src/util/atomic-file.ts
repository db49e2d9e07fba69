// Files that must never be seen half-written (credentials, checkpoints, the hub outbox).
// Invariants: the file at `path` is always either the old content, whole, or the new content,
// whole; a write that fails (a full disk: ENOSPC, EDQUOT) removes its temp file and leaves the old
// file untouched, and throws a FileWriteError naming the file.
import * as fs from "node:fs";
import { dirname } from "node:path";

export interface AtomicWriteOptions {
  /** Mode of the file (default 0600). */
  mode?: number;
  /** Mode of parent folders this call creates (default 0700). */
  dirMode?: number;
  /** The file system calls (injected in tests to fail like a full disk). */
  fs?: AtomicFs;
}

/** The synchronous node:fs calls an atomic write makes. */
export type AtomicFs = Pick<
  typeof fs,
  "mkdirSync" | "openSync" | "writeSync" | "fsyncSync" | "closeSync" | "renameSync" | "rmSync"
>;

/** A write of `path` failed; `code` is the system's (ENOSPC when the disk is full). */
export class FileWriteError extends Error {
  constructor(
    readonly path: string,
    readonly code: string | undefined,
    cause: unknown,
  ) {
    super(`cannot write ${path}: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = "FileWriteError";
  }
}

/** The errno code of a failed system call (ENOSPC), if it has one. */
export function errorCode(err: unknown): string | undefined {
  if (err instanceof FileWriteError) return err.code;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/**
 * Writes `text` to `path` through a temp file, fsync and rename, then fsyncs the folder so that
 * the rename itself survives a power cut (without it ext4 may come back with the old file, or
 * none); creates the parent folder. Throws FileWriteError; the old file stays whole.
 */
export function writeFileAtomic(path: string, text: string, opts: AtomicWriteOptions = {}): void {
  const f = opts.fs ?? fs;
  const tmp = `${path}.tmp`;
  let created = false;
  try {
    f.mkdirSync(dirname(path), { recursive: true, mode: opts.dirMode ?? 0o700 });
    const fd = f.openSync(tmp, "w", opts.mode ?? 0o600);
    created = true;
    try {
      writeAll(f, fd, Buffer.from(text, "utf8"));
      f.fsyncSync(fd);
    } finally {
      f.closeSync(fd);
    }
    f.renameSync(tmp, path);
    created = false;
  } catch (err) {
    if (created) removeQuietly(f, tmp);
    throw new FileWriteError(path, errorCode(err), err);
  }
  syncFolder(f, dirname(path));
}

/** writeSync until every byte is written (a short write is not an error). */
function writeAll(f: AtomicFs, fd: number, bytes: Buffer): void {
  let off = 0;
  while (off < bytes.length) {
    const n = f.writeSync(fd, bytes, off, bytes.length - off);
    if (n <= 0) throw new Error(`write of ${bytes.length - off} bytes wrote nothing`);
    off += n;
  }
}

function removeQuietly(f: AtomicFs, path: string): void {
  try {
    f.rmSync(path, { force: true });
  } catch {
    // the write's own error is the one to report
  }
}

/** fsync of folder `dir`, so that renames and removals in it survive a power cut. */
export function fsyncFolder(dir: string): void {
  syncFolder(fs, dir);
}

/** fsync of a folder; where the platform refuses it (EISDIR, EINVAL) there is nothing to do. */
function syncFolder(f: AtomicFs, dir: string): void {
  let fd: number | undefined;
  try {
    fd = f.openSync(dir, "r");
    f.fsyncSync(fd);
  } catch {
    // not supported here
  } finally {
    if (fd !== undefined) f.closeSync(fd);
  }
}
