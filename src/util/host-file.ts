// Small files of the host that every new pod reads (/etc/resolv.conf, /etc/hosts): read once and
// kept while the file's inode, size and modification time stay the same, so that a burst of new
// pods reads each once instead of once or twice per pod. The check is a synchronous stat, which
// for such a file costs a few microseconds; a change is seen at the next read.

import { readFileSync, statSync } from "node:fs";

export class HostFiles {
  /** What each path held when last read, under its stat key (inode:size:mtime). */
  private readonly cache = new Map<string, { key: string; text: string }>();

  /** The text of `path`, or undefined when it does not exist; throws on other errors. */
  read(path: string): string | undefined {
    let key: string;
    try {
      const s = statSync(path);
      key = `${s.ino}:${s.size}:${s.mtimeMs}`;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw err;
    }
    const hit = this.cache.get(path);
    if (hit?.key === key) return hit.text;
    const text = readFileSync(path, "utf8");
    this.cache.set(path, { key, text });
    return text;
  }
}
