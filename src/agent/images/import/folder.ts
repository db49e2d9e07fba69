// The image import folder: archives dropped into it (`imagesImportPath`) are imported into the
// runtime when the agent starts and when a new or changed one appears, found by looking at the
// folder every few seconds. Each file is imported once per version (its size and modification
// time): a failed one is reported (a node event and a log line with the file and the reason)
// and left alone until it changes. Images imported from a file still in the folder are pinned
// against the image GC.
//
// Invariants:
// - One import at a time, files in name order; scan() never throws.
// - A transient failure (runtime unreachable) is not held against the file: tried again.
// - A file modified less than `settleMs` ago is left for a later scan (it may still be copied).
// - pinned() holds exactly the names imported from files present at the last scan.

import type { Clock } from "../../../util/clock.ts";
import type { Logger } from "../../../util/log.ts";

/** A file of the folder as listed. */
export interface FolderFile {
  name: string;
  size: number;
  mtimeMs: number;
}

export interface ImportFolderDeps {
  path: string;
  clock: Clock;
  logger: Logger;
  /** Time between scans. */
  periodMs: number;
  /** Files younger than this are not read yet. */
  settleMs: number;
  /** The archive files of the folder (empty when it does not exist). */
  list(path: string): Promise<FolderFile[]>;
  /** Imports the archive at `file`: the image names it gave; throws with the reason. */
  importArchive(file: string, signal: AbortSignal): Promise<string[]>;
  /** Whether a failure is the runtime's passing state (unreachable, no answer in time), to be
   * retried at the next scan rather than reported against the file. */
  transient(err: unknown): boolean;
  /** An event about the node. */
  nodeEvent(type: "Normal" | "Warning", reason: string, message: string): void;
}

/** What became of one version of one file. */
interface FileState {
  /** "<size>:<mtime>" of the version handled. */
  version: string;
  /** Names imported; empty when the import failed. */
  names: string[];
}

const ARCHIVE_NAME = /\.(tar|tar\.gz|tgz|tar\.zst|tar\.zstd|tzst)$/;

/** Whether a file name looks like an image archive (hidden files are not). */
export function isArchiveName(name: string): boolean {
  return !name.startsWith(".") && ARCHIVE_NAME.test(name);
}

export class ImportFolder {
  /** Handled versions by file name, for files present at the last scan. */
  private readonly files = new Map<string, FileState>();

  constructor(private readonly deps: ImportFolderDeps) {}

  /** The image names imported from archives still in the folder. */
  pinned(): Set<string> {
    const out = new Set<string>();
    for (const f of this.files.values()) for (const n of f.names) out.add(n);
    return out;
  }

  /** One look at the folder: imports each new or changed archive. */
  async scan(signal: AbortSignal): Promise<void> {
    let listed: FolderFile[];
    try {
      listed = (await this.deps.list(this.deps.path)).filter((f) => isArchiveName(f.name));
    } catch (err) {
      this.deps.logger.warn("cannot list the image import folder", {
        path: this.deps.path,
        error: err,
      });
      return;
    }
    const present = new Set(listed.map((f) => f.name));
    for (const name of [...this.files.keys()]) if (!present.has(name)) this.files.delete(name);
    const now = this.deps.clock.now();
    for (const f of listed.sort((a, b) => (a.name < b.name ? -1 : 1))) {
      if (signal.aborted) return;
      const version = `${f.size}:${f.mtimeMs}`;
      if (this.files.get(f.name)?.version === version) continue;
      if (now - f.mtimeMs < this.deps.settleMs) continue;
      const names = await this.importOne(f.name, signal);
      if (names !== undefined) this.files.set(f.name, { version, names });
    }
  }

  /** The names imported from `name`: [] when it failed, undefined when it is to be tried
   * again (a transient failure). */
  private async importOne(name: string, signal: AbortSignal): Promise<string[] | undefined> {
    const file = `${this.deps.path}/${name}`;
    const started = this.deps.clock.now();
    try {
      const names = await this.deps.importArchive(file, signal);
      const ms = this.deps.clock.now() - started;
      this.deps.logger.info("imported image archive", { file, images: names.join(", "), ms });
      this.deps.nodeEvent(
        "Normal",
        "ImageImported",
        `Imported ${names.join(", ")} from image archive ${JSON.stringify(name)}`,
      );
      return names;
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      if (signal.aborted || this.deps.transient(err)) {
        this.deps.logger.warn("image archive import interrupted; trying again", { file, reason });
        return undefined;
      }
      this.deps.logger.warn("cannot import image archive", { file, reason });
      this.deps.nodeEvent(
        "Warning",
        "ImageImportFailed",
        `Cannot import image archive ${JSON.stringify(name)}: ${reason}`,
      );
      return [];
    }
  }

  /** Scans now and then every periodMs until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await this.scan(signal);
      try {
        await this.deps.clock.sleep(this.deps.periodMs, signal);
      } catch {
        return;
      }
    }
  }
}
