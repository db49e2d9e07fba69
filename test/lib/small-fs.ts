// Small filesystems that a test fills to 100 % and frees again: a size-limited tmpfs mounted on a
// folder of the test (as test/e2e/eviction-disk.test.ts gives the agent's root dir), filled with
// one file until the kernel answers ENOSPC, and freed by removing it. Needs root (mount).
import {
  closeSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";

/** Mounts a tmpfs of `sizeMiB` on `dir` (created when missing). */
export function mountTmpfs(dir: string, sizeMiB: number): void {
  mkdirSync(dir, { recursive: true });
  const p = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", `size=${sizeMiB}m`, "tmpfs", dir], {
    stderr: "pipe",
  });
  if (p.exitCode !== 0) throw new Error(`cannot mount a tmpfs on ${dir}: ${p.stderr.toString()}`);
}

/** Unmounts `dir` when something is mounted there (lazily: a process may still hold a file). */
export function unmount(dir: string): void {
  const mounted = readFileSync("/proc/self/mounts", "utf8")
    .split("\n")
    .some((l) => l.split(" ")[1] === dir);
  if (mounted) Bun.spawnSync(["umount", "-l", dir]);
}

/** Fills the filesystem of `dir` with the file `<dir>/<name>` until a write fails with ENOSPC;
 * returns the file, for free(). */
export function fill(dir: string, name = "fill-to-full"): string {
  const path = join(dir, name);
  const fd = openSync(path, "a");
  const chunk = Buffer.alloc(64 * 1024, 0x5a);
  try {
    for (;;) {
      try {
        writeSync(fd, chunk);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ENOSPC") break;
        throw err;
      }
    }
    // What is left is smaller than a chunk: fill it byte by page.
    const page = Buffer.alloc(512, 0x5a);
    for (;;) {
      try {
        writeSync(fd, page);
      } catch {
        break;
      }
    }
  } finally {
    closeSync(fd);
  }
  return path;
}

/** Gives back `bytes` of what fill() took (room for small writes, not for large ones). */
export function leave(path: string, bytes: number): void {
  truncateSync(path, Math.max(0, statSync(path).size - bytes));
}

/** Frees what fill() took. */
export function free(path: string): void {
  rmSync(path, { force: true });
}
