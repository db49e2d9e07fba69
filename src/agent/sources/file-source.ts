// The static pod source: the manifest folder, read whole on every relist, which runs on a
// change seen by fs.watch (gathered, see watch.ts) and every checkFrequencyMs so that a missed
// event heals.
// Every relist hands the complete set of this source's ConfigMaps and Secrets to onObjects, then
// the complete set of its pods to onSnapshot (SET semantics), so that a pod never starts before
// an object written with it is known.
//
// Invariants: a file's problem is reported once per distinct content and message; a file
// whose edit is invalid keeps contributing its last valid pods until it is valid again or
// deleted (an empty file counts as invalid: a writer truncated it and has not written yet; so
// does a YAML file whose last line has no newline, or one with NUL bytes: cut off mid-write); a
// pod's config.seen time stays the same for as long as its uid is present.

import { createHash } from "node:crypto";
import { constants, watch as fsWatch, type Stats } from "node:fs";
import { open, readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Pod } from "../../api/index.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { type FileContent, type FileVersion, selectFilePods } from "./file-select.ts";
import {
  CONFIG_SEEN_ANNOTATION,
  type ConfigObject,
  objectKey,
  parseManifestFile,
  rfc3339Nano,
} from "./parse.ts";
import { FolderWatcher, type WatchDir } from "./watch.ts";

const MAX_MANIFEST_BYTES = 10 * 1024 * 1024;

/** A manifest that cannot be used, reported through FileSourceDeps.onError. */
export interface ManifestProblem {
  /** The file's path. */
  path: string;
  /** One line naming the file, and the pod and field where known. */
  message: string;
}

export interface FileSourceDeps {
  /** The manifest folder (staticPodPath); it may not exist yet. */
  path: string;
  nodeName: string;
  /** Period of the full relist (fileCheckFrequency). */
  checkFrequencyMs: number;
  clock: Clock;
  log: Logger;
  /** Receives the complete set of pods of this source after every relist. */
  onSnapshot(pods: Pod[]): void;
  /** Receives the complete set of ConfigMaps and Secrets of this source after every relist,
   * just before onSnapshot. */
  onObjects?(objects: ConfigObject[]): void;
  /** Receives each unusable manifest, once per distinct content (the source has logged it). */
  onError(problem: ManifestProblem): void;
  /** A relist runs once the folder had no change event for this long (default 5 ms), so that
   * the events of one save, or of many files written at once, make one relist... */
  quietMs?: number;
  /** ...and at most this long after the first event (default 20 ms). Both add to the delay from
   * a write to the pod starting. */
  maxDelayMs?: number;
  /** Larger files are rejected (default 10 MiB). */
  maxFileBytes?: number;
  /** Watches a folder; defaults to fs.watch. */
  watchDir?: WatchDir;
}

export interface FileSource {
  /** Relists now and on every change or period until `signal` aborts; never throws. */
  run(signal: AbortSignal): Promise<void>;
  /** One relist: reads the folder, reports problems, calls onSnapshot and returns the pods.
   * Leaves the last snapshot in place (and returns it) when the folder cannot be read. */
  relist(): Promise<Pod[]>;
}

/** What reading one folder entry found. */
type EntryRead =
  | { kind: "absent" }
  | { kind: "too-large"; size: number }
  | { kind: "not-a-file"; what: string }
  | { kind: "unreadable"; message: string }
  | { kind: "content"; content: Buffer };

interface FileRecord {
  /** md5 of the content last read and the version parsed from it. */
  contentKey: string;
  version: FileVersion;
  lastValid?: FileContent;
  /** contentKey + message of the last problem reported for this file. */
  reported?: string;
}

/** Names that are never manifests: hidden files, editor backups, swap and temp files. */
function isIgnoredManifestName(name: string): boolean {
  return (
    name.startsWith(".") ||
    name.endsWith("~") ||
    (name.startsWith("#") && name.endsWith("#")) ||
    /\.(swp|swo|swx|tmp)$/.test(name)
  );
}

/**
 * Why a manifest's content looks cut off, or undefined. A YAML file whose last line has no
 * newline is taken as not completely written (its prefix may well parse, as a pod with a
 * truncated image name say); JSON needs no such rule, as a cut JSON never parses. NUL bytes are
 * what a power loss can leave where data was not yet written.
 */
function unfinishedWrite(content: Buffer): string | undefined {
  if (content.includes(0))
    return "the file holds NUL bytes (cut off by a power loss?); it is read again when rewritten";
  const first = content.toString("latin1", 0, 64).trimStart()[0];
  if (first === "{" || first === "[" || content[content.length - 1] === 0x0a) return undefined;
  return "the file's last line has no newline: taken as not completely written (a writer still at it, or cut off by a power loss); it is read again once it ends with a newline";
}

/** What a folder entry that is neither a file nor a folder is, for messages. */
function fileKind(info: Stats): string {
  if (info.isCharacterDevice()) return "a character device";
  if (info.isBlockDevice()) return "a block device";
  if (info.isFIFO()) return "a fifo";
  if (info.isSocket()) return "a socket";
  return "not a file";
}

/**
 * Reads a file once it is open and checked: opened without blocking (the entry may have become a
 * fifo since it was stat'ed, and a blocked read would stall every relist), a regular file by
 * its open handle, and at most `max` bytes (a file still growing is not read whole).
 */
async function readBounded(path: string, max: number): Promise<EntryRead> {
  const handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  try {
    const info = await handle.stat();
    if (!info.isFile()) return { kind: "not-a-file", what: fileKind(info) };
    let buf = Buffer.alloc(Math.min(info.size, max) + 1);
    let got = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buf, got, buf.length - got, got);
      if (bytesRead === 0) return { kind: "content", content: buf.subarray(0, got) };
      got += bytesRead;
      if (got > max) return { kind: "too-large", size: got };
      if (got === buf.length) {
        // The file grew since its stat: read on, up to the limit.
        const bigger = Buffer.alloc(Math.min(buf.length * 2, max + 1));
        buf.copy(bigger);
        buf = bigger;
      }
    }
  } finally {
    await handle.close();
  }
}

export function createFileSource(deps: FileSourceDeps): FileSource {
  return new ManifestFolderSource(deps);
}

class ManifestFolderSource implements FileSource {
  private readonly files = new Map<string, FileRecord>();
  /** uid → when first seen (ms). */
  private readonly seen = new Map<string, number>();
  private last: Pod[] = [];
  /** The objects of the last selection, by objectKey (immutable ones may not change). */
  private objects = new Map<string, ConfigObject>();
  private missingLogged = false;
  /** Serializes relists (run() and direct calls). */
  private chain: Promise<unknown> = Promise.resolve();
  private readonly maxBytes: number;

  constructor(private readonly deps: FileSourceDeps) {
    this.maxBytes = deps.maxFileBytes ?? MAX_MANIFEST_BYTES;
  }

  relist(): Promise<Pod[]> {
    const next = this.chain.then(() => this.relistOnce());
    this.chain = next.catch(() => undefined);
    return next;
  }

  async run(signal: AbortSignal): Promise<void> {
    const watcher = new FolderWatcher({
      path: this.deps.path,
      clock: this.deps.clock,
      log: this.deps.log,
      quietMs: this.deps.quietMs ?? 5,
      maxDelayMs: this.deps.maxDelayMs ?? 20,
      watchDir: this.deps.watchDir ?? defaultWatchDir,
    });
    this.deps.log.info("watching static pod folder", { path: this.deps.path });
    try {
      while (!signal.aborted) {
        await watcher.sync();
        try {
          await this.relist();
        } catch (err) {
          this.deps.log.error("static pod folder relist failed", {
            path: this.deps.path,
            error: err,
          });
        }
        await watcher.waitForChange(this.deps.checkFrequencyMs, signal);
      }
    } finally {
      watcher.close();
    }
  }

  private async relistOnce(): Promise<Pod[]> {
    let names: string[];
    try {
      names = await readdir(this.deps.path);
    } catch (err) {
      return this.folderUnreadable(err as NodeJS.ErrnoException);
    }
    if (this.missingLogged) this.deps.log.info("static pod folder found", { path: this.deps.path });
    this.missingLogged = false;
    // The files are read at once (a burst of new manifests is read in one round of I/O, not one
    // file after another), then taken in name order.
    const paths = names
      .filter((name) => !isIgnoredManifestName(name))
      .sort()
      .map((name) => join(this.deps.path, name));
    const reads = await Promise.all(paths.map((path) => this.readEntry(path)));
    const present = new Set<string>();
    paths.forEach((path, i) => {
      if (this.take(path, reads[i] as EntryRead)) present.add(path);
    });
    for (const path of this.files.keys()) if (!present.has(path)) this.files.delete(path);
    return this.publish();
  }

  private folderUnreadable(err: NodeJS.ErrnoException): Pod[] {
    if (err.code !== "ENOENT") {
      this.deps.log.warn("cannot read static pod folder", { path: this.deps.path, error: err });
      return this.last;
    }
    if (!this.missingLogged) {
      this.deps.log.info("static pod folder does not exist; checking again periodically", {
        path: this.deps.path,
      });
      this.missingLogged = true;
    }
    this.files.clear();
    return this.publish();
  }

  /** Reads one folder entry; touches no state, so that entries can be read at once. */
  private async readEntry(path: string): Promise<EntryRead> {
    let info: Stats;
    try {
      info = await stat(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
        this.deps.log.warn("cannot stat manifest", { path, error: err });
      }
      return { kind: "absent" };
    }
    if (info.isDirectory()) {
      this.deps.log.debug("not recursing into folder", { path });
      return { kind: "absent" };
    }
    if (!info.isFile()) return { kind: "not-a-file", what: fileKind(info) };
    if (info.size > this.maxBytes) return { kind: "too-large", size: info.size };
    try {
      return await readBounded(path, this.maxBytes);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return { kind: "absent" };
      return { kind: "unreadable", message: (err as Error).message };
    }
  }

  /** Records what was read of one entry into this.files; false when it is not a manifest file. */
  private take(path: string, read: EntryRead): boolean {
    const prev = this.files.get(path);
    switch (read.kind) {
      case "absent":
        return false;
      case "too-large": {
        const message = `manifest ${path}: file is too large (${read.size} bytes, at most ${this.maxBytes})`;
        this.record(path, `size:${read.size}`, { ok: false, message }, prev);
        return true;
      }
      case "not-a-file": {
        const message = `manifest ${path}: not a regular file (${read.what}); only regular files are read`;
        this.record(path, `type:${read.what}`, { ok: false, message }, prev);
        return true;
      }
      case "unreadable": {
        const message = `manifest ${path}: cannot read: ${read.message}`;
        this.record(path, `error:${message}`, { ok: false, message }, prev);
        return true;
      }
    }
    const key = createHash("md5").update(read.content).digest("hex");
    if (prev?.contentKey === key) return true;
    if (read.content.length === 0) {
      // Truncated by a writer that has not written yet (`cmd > file`, an editor saving in place):
      // not a pod-less file, so the file's last valid pods keep running.
      const message = `manifest ${path}: the file is empty (delete it to remove its pods)`;
      this.record(path, key, { ok: false, message }, prev);
      return true;
    }
    const unfinished = unfinishedWrite(read.content);
    if (unfinished !== undefined) {
      // Read while a writer is at it, or left so by a power loss: never a pod from part of a file.
      this.record(path, key, { ok: false, message: `manifest ${path}: ${unfinished}` }, prev);
      return true;
    }
    const version = parseManifestFile(read.content.toString("utf8"), {
      path,
      nodeName: this.deps.nodeName,
    });
    this.record(path, key, version, prev);
    return true;
  }

  private record(
    path: string,
    contentKey: string,
    version: FileVersion,
    prev: FileRecord | undefined,
  ) {
    const rec: FileRecord = { contentKey, version };
    if (prev?.lastValid) rec.lastValid = prev.lastValid;
    if (prev?.reported) rec.reported = prev.reported;
    this.files.set(path, rec);
  }

  /** Selects the pods to run, reports new problems, stamps config.seen and hands them on. */
  private publish(): Pod[] {
    const inputs = [...this.files].map(([path, rec]) => ({
      path,
      current: rec.version,
      ...(rec.lastValid ? { lastValid: rec.lastValid } : {}),
    }));
    const pods: Pod[] = [];
    const objects = new Map<string, ConfigObject>();
    for (const outcome of selectFilePods(inputs, this.objects)) {
      const rec = this.files.get(outcome.path);
      if (rec === undefined) continue;
      if (outcome.current) rec.lastValid = { pods: outcome.pods, objects: outcome.objects };
      this.report(outcome.path, rec, outcome.error);
      pods.push(...outcome.pods);
      for (const o of outcome.objects) objects.set(objectKey(o), o);
    }
    this.objects = objects;
    this.deps.onObjects?.([...objects.values()]);
    this.last = this.stampSeen(pods);
    this.deps.onSnapshot(this.last);
    return this.last;
  }

  private report(path: string, rec: FileRecord, error: string | undefined): void {
    if (error === undefined) {
      rec.reported = undefined;
      return;
    }
    const key = `${rec.contentKey}\n${error}`;
    if (rec.reported === key) return;
    rec.reported = key;
    this.deps.log.warn("invalid static pod manifest", { path, error });
    this.deps.onError({ path, message: error });
  }

  private stampSeen(pods: Pod[]): Pod[] {
    const now = this.deps.clock.now();
    const live = new Set<string>();
    const out = pods.map((pod) => {
      const uid = pod.metadata.uid ?? "";
      live.add(uid);
      const at = this.seen.get(uid) ?? now;
      this.seen.set(uid, at);
      const annotations = {
        ...pod.metadata.annotations,
        [CONFIG_SEEN_ANNOTATION]: rfc3339Nano(at),
      };
      const creationTimestamp = new Date(Math.floor(at / 1000) * 1000)
        .toISOString()
        .replace(".000Z", "Z");
      return { ...pod, metadata: { ...pod.metadata, annotations, creationTimestamp } };
    });
    for (const uid of this.seen.keys()) if (!live.has(uid)) this.seen.delete(uid);
    return out;
  }
}

const defaultWatchDir: WatchDir = (dir, onChange) => {
  const watcher = fsWatch(dir, { persistent: false }, () => onChange());
  return {
    close: () => watcher.close(),
    onError: (fn) => {
      watcher.on("error", fn);
    },
  };
};
