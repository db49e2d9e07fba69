// Mounting for the volume manager: tmpfs for in-memory volumes, bind mounts for subPaths, and
// the mount table to find what is mounted under a pod's folder. The system mounter runs the
// host's `mount` and `umount` (util-linux or busybox), as the kubelet does; tests inject a fake.

import { readFile, stat } from "node:fs/promises";
import { parseMountinfo } from "../cm/mountinfo.ts";

export interface MountPoint {
  path: string;
  fsType: string;
}

export interface Mounter {
  /** Mounts a new tmpfs at `dir` (an existing folder); `sizeBytes` 0: the kernel's default
   * (half the RAM). Throws with the command's error. */
  mountTmpfs(dir: string, sizeBytes: number): Promise<void>;
  /** Bind-mounts `source` (a file or folder) onto `target` (an existing one of the same kind). */
  bind(source: string, target: string): Promise<void>;
  /** Unmounts `target`. Throws with the command's error. */
  unmount(target: string): Promise<void>;
  /** The mount points at `dir` or under it, deepest first. */
  mountsUnder(dir: string): Promise<MountPoint[]>;
  /** The file's identity ("<device>:<inode>"), following symlinks: a bind mount's target has
   * its source's. */
  identity(path: string): Promise<string>;
}

/** Mount points at or under `dir` in a mountinfo text, deepest first. */
function mountPointsUnder(mountinfo: string, dir: string): MountPoint[] {
  const base = dir.endsWith("/") ? dir.slice(0, -1) : dir;
  return parseMountinfo(mountinfo)
    .filter((m) => m.mountPoint === base || m.mountPoint.startsWith(`${base}/`))
    .map((m) => ({ path: m.mountPoint, fsType: m.fsType }))
    .sort((a, b) => b.path.length - a.path.length);
}

async function run(argv: string[]): Promise<void> {
  const proc = Bun.spawn(argv, { stdout: "ignore", stderr: "pipe" });
  const [code, err] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
  if (code !== 0) {
    const detail = err.trim() || `exit status ${code}`;
    throw new Error(`${argv.join(" ")} failed: ${detail}`);
  }
}

export function createSystemMounter(mountinfoPath = "/proc/self/mountinfo"): Mounter {
  return {
    mountTmpfs: (dir, sizeBytes) =>
      run([
        "mount",
        "-t",
        "tmpfs",
        ...(sizeBytes > 0 ? ["-o", `size=${sizeBytes}`] : []),
        "tmpfs",
        dir,
      ]),
    bind: (source, target) => run(["mount", "-o", "bind", source, target]),
    unmount: (target) => run(["umount", target]),
    mountsUnder: async (dir) => mountPointsUnder(await readFile(mountinfoPath, "utf8"), dir),
    identity: async (path) => {
      const s = await stat(path);
      return `${s.dev}:${s.ino}`;
    },
  };
}
