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
// pod's config.seen time stays the same for as long as its uid is present. With a
// LastValidStore, a file's last valid version outlives the agent: a file invalid at start
// contributes the version last used before, as if the agent had not restarted.

import { createHash } from "node:crypto";
import { watch as fsWatch } from "node:fs";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import type { Pod } from "../../api/index.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { type EntryRead, isIgnoredManifestName, readEntry, unfinishedWrite } from "./file-read.ts";
import { type FileContent, type FileVersion, selectFilePods } from "./file-select.ts";
import type { LastValidStore } from "./last-valid.ts";
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
  /** Where each file's last valid version is kept across restarts; none: in memory only. */
  lastValid?: LastValidStore;
}

export interface FileSource {
  /** Relists now and on every change or period until `signal` aborts; never throws. */
  run(signal: AbortSignal): Promise<void>;
  /** One relist: reads the folder, reports problems, calls onSnapshot and returns the pods.
   * Leaves the last snapshot in place (and returns it) when the folder cannot be read. */
  relist(): Promise<Pod[]>;
}

interface FileRecord {
  /** md5 of the content last read and the version parsed from it. */
  contentKey: string;
  version: FileVersion;
  lastValid?: FileContent;
  /** The text of `version` while it is valid and not yet saved as last valid. */
  unsaved?: string;
  /** contentKey + message of the last problem reported for this file. */
  reported?: string;
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
  /** Whether a relist has read the folder (saved versions of files gone are pruned then). */
  private listed = false;
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
    const reads = await Promise.all(
      paths.map((path) => readEntry(path, this.maxBytes, this.deps.log)),
    );
    const present = new Set<string>();
    paths.forEach((path, i) => {
      if (this.take(path, reads[i] as EntryRead)) present.add(path);
    });
    for (const path of this.files.keys()) if (!present.has(path)) this.forget(path);
    if (!this.listed) this.deps.lastValid?.prune(present);
    this.listed = true;
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
    for (const path of this.files.keys()) this.forget(path);
    return this.publish();
  }

  /** The file at `path` is gone: so are its pods and its last valid version. */
  private forget(path: string): void {
    this.files.delete(path);
    this.deps.lastValid?.remove(path);
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
    const text = read.content.toString("utf8");
    const version = parseManifestFile(text, { path, nodeName: this.deps.nodeName });
    this.record(path, key, version, prev, version.ok ? text : undefined);
    return true;
  }

  private record(
    path: string,
    contentKey: string,
    version: FileVersion,
    prev: FileRecord | undefined,
    text?: string,
  ) {
    const rec: FileRecord = { contentKey, version };
    const lastValid = prev ? prev.lastValid : this.savedVersion(path, version);
    if (lastValid) rec.lastValid = lastValid;
    if (text !== undefined) rec.unsaved = text;
    if (prev?.reported) rec.reported = prev.reported;
    this.files.set(path, rec);
  }

  /** The saved last valid version of a file first seen invalid (after a restart), if any. */
  private savedVersion(path: string, version: FileVersion): FileContent | undefined {
    if (version.ok) return undefined;
    const text = this.deps.lastValid?.load(path);
    if (text === undefined) return undefined;
    const saved = parseManifestFile(text, { path, nodeName: this.deps.nodeName });
    if (saved.ok) return { pods: saved.pods, objects: saved.objects };
    this.deps.log.warn("the saved last valid version of a manifest is not valid; ignored", {
      path,
      error: saved.message,
    });
    return undefined;
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
      if (outcome.current) {
        rec.lastValid = { pods: outcome.pods, objects: outcome.objects };
        // Saved once; a save that failed (a full disk) is made again at the next relist.
        const saved =
          rec.unsaved === undefined || this.deps.lastValid?.save(outcome.path, rec.unsaved);
        if (saved !== false) rec.unsaved = undefined;
      }
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
