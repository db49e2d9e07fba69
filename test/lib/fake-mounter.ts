// A Mounter for unit tests: records tmpfs and bind mounts instead of making them. A bind target
// reports the identity its source had when it was bound, as a real bind does.
import { stat } from "node:fs/promises";
import type { Mounter, MountPoint } from "../../src/agent/volumes/index.ts";

export class FakeMounter implements Mounter {
  /** Mount point → filesystem type ("tmpfs", or "bind"). */
  readonly mounts = new Map<string, string>();
  /** Bind target → source. */
  readonly binds = new Map<string, string>();
  /** tmpfs mount point → size in bytes. */
  readonly sizes = new Map<string, number>();
  /** Every call, e.g. "tmpfs /dir 1048576", "bind /a /b", "umount /b". */
  readonly calls: string[] = [];
  /** Bind target → its source's identity at bind time. */
  private readonly boundIds = new Map<string, string>();
  /** Unmounts of these paths fail. */
  readonly busy = new Set<string>();

  async mountTmpfs(dir: string, sizeBytes: number): Promise<void> {
    this.calls.push(`tmpfs ${dir} ${sizeBytes}`);
    this.mounts.set(dir, "tmpfs");
    this.sizes.set(dir, sizeBytes);
  }

  async bind(source: string, target: string): Promise<void> {
    this.calls.push(`bind ${source} ${target}`);
    this.mounts.set(target, "bind");
    this.binds.set(target, source);
    this.boundIds.set(target, await this.identity(source));
  }

  async unmount(target: string): Promise<void> {
    this.calls.push(`umount ${target}`);
    if (this.busy.has(target)) throw new Error(`umount ${target} failed: target is busy`);
    this.mounts.delete(target);
    this.binds.delete(target);
    this.boundIds.delete(target);
  }

  async mountsUnder(dir: string): Promise<MountPoint[]> {
    return [...this.mounts]
      .filter(([path]) => path === dir || path.startsWith(`${dir}/`))
      .map(([path, fsType]) => ({ path, fsType }))
      .sort((a, b) => b.path.length - a.path.length);
  }

  async identity(path: string): Promise<string> {
    const bound = this.boundIds.get(path);
    if (bound !== undefined) return bound;
    const s = await stat(this.binds.get(path) ?? path);
    return `${s.dev}:${s.ino}`;
  }
}
