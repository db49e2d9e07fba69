// The manifest folder's last valid versions on disk (<rootDir>/state/manifests/), so that a file
// that is invalid when the agent starts (an edit half-typed before a restart or a power cut) keeps
// its pods running, as it does while the agent runs (docs/kubelet-differences.md).
// One file per manifest path, named by the md5 of the path, holding {path, content}: the bytes
// of the manifest's last version that was used, whole. Mode 0600: manifests may hold Secrets.
//
// Invariants: a saved copy is written atomically (it is the old copy or the new one, whole);
// failing to read or write a copy is logged and never stops the file source; a copy is saved
// only when its content differs from the one on disk.

import { createHash } from "node:crypto";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { writeFileAtomic } from "../../util/atomic-file.ts";
import type { Logger } from "../../util/log.ts";

export interface LastValidStore {
  /** The content last saved for `path`, or undefined. */
  load(path: string): string | undefined;
  /** Saves `content` as the last valid version of `path` (nothing when it is already saved);
   * false when it could not be written (logged; the caller tries again later). */
  save(path: string, content: string): boolean;
  /** Forgets the copy of `path` (its manifest is gone). */
  remove(path: string): void;
  /** Forgets every saved copy whose path is not in `keep` (the manifests that exist at start). */
  prune(keep: ReadonlySet<string>): void;
}

interface Saved {
  path: string;
  content: string;
}

const md5 = (text: string) => createHash("md5").update(text).digest("hex");

export function createLastValidStore(dir: string, log: Logger): LastValidStore {
  return new DiskLastValidStore(dir, log);
}

class DiskLastValidStore implements LastValidStore {
  /** md5 of the content on disk per path, for the copies read or written since start. */
  private readonly onDisk = new Map<string, string>();

  constructor(
    private readonly dir: string,
    private readonly log: Logger,
  ) {}

  load(path: string): string | undefined {
    const saved = this.read(join(this.dir, `${md5(path)}.json`));
    if (saved === undefined || saved.path !== path) return undefined;
    this.onDisk.set(path, md5(saved.content));
    return saved.content;
  }

  save(path: string, content: string): boolean {
    const key = md5(content);
    if (this.onDisk.get(path) === undefined) this.load(path);
    if (this.onDisk.get(path) === key) return true;
    const file = join(this.dir, `${md5(path)}.json`);
    try {
      writeFileAtomic(file, `${JSON.stringify({ path, content })}\n`);
      this.onDisk.set(path, key);
      return true;
    } catch (err) {
      this.log.warn("cannot save the last valid version of a manifest", { path, error: err });
      return false;
    }
  }

  remove(path: string): void {
    this.onDisk.delete(path);
    this.removeFile(join(this.dir, `${md5(path)}.json`));
  }

  prune(keep: ReadonlySet<string>): void {
    let names: string[];
    try {
      names = readdirSync(this.dir).filter((n) => n.endsWith(".json"));
    } catch {
      return;
    }
    for (const name of names) {
      const file = join(this.dir, name);
      const saved = this.read(file);
      if (saved !== undefined && keep.has(saved.path)) continue;
      if (saved !== undefined) this.onDisk.delete(saved.path);
      this.removeFile(file);
    }
  }

  private removeFile(file: string): void {
    try {
      rmSync(file, { force: true });
    } catch (err) {
      this.log.warn("cannot remove a saved manifest version", { file, error: err });
    }
  }

  /** The copy in `file`; undefined when absent or not one (a torn file cannot be: see top). */
  private read(file: string): Saved | undefined {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
        this.log.warn("cannot read a saved manifest version", { file, error: err });
      }
      return undefined;
    }
    try {
      const saved = JSON.parse(text) as Partial<Saved>;
      if (typeof saved.path === "string" && typeof saved.content === "string") {
        return { path: saved.path, content: saved.content };
      }
    } catch {
      // Reported below.
    }
    this.log.warn("ignoring a saved manifest version that is not one", { file });
    return undefined;
  }
}
