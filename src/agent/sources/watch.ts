// Watching the manifest folder: change events are gathered into one wake-up, which comes once the
// folder has been quiet for `quietMs` (so that the events of one save, or of many files copied in
// at once, make one relist) and no later than `maxDelayMs` after the first event (so that a stream
// of events cannot put it off). The watch is (re)started whenever the folder appears or is
// replaced by another one of the same path.

import { stat } from "node:fs/promises";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";

/** A started watch of one folder. */
export interface DirWatch {
  close(): void;
  /** Registers a handler for a failure of the watch (after which it delivers nothing). */
  onError(fn: (err: Error) => void): void;
}

/** Starts watching `dir`, calling `onChange` for any change in it; throws if it cannot. */
export type WatchDir = (dir: string, onChange: () => void) => DirWatch;

export interface FolderWatcherDeps {
  path: string;
  clock: Clock;
  log: Logger;
  /** The wake-up comes once no event came for this long... */
  quietMs: number;
  /** ...and at most this long after the first event. */
  maxDelayMs: number;
  watchDir: WatchDir;
}

export class FolderWatcher {
  private watch: DirWatch | undefined;
  /** Inode of the watched folder; another inode means the folder was replaced. */
  private watchedIno: number | undefined;
  private cancelWake: (() => void) | undefined;
  /** When the first event of the pending wake-up came. */
  private firstEventAt: number | undefined;
  /** A gathered change not yet consumed by waitForChange. */
  private dirty = false;
  private wake: (() => void) | undefined;

  constructor(private readonly deps: FolderWatcherDeps) {}

  /** Starts, restarts or stops the watch to match the folder as it is now. */
  async sync(): Promise<void> {
    let ino: number | undefined;
    try {
      const info = await stat(this.deps.path);
      ino = info.isDirectory() ? info.ino : undefined;
    } catch {
      ino = undefined;
    }
    if (ino === undefined) {
      this.stopWatch();
      return;
    }
    if (this.watch !== undefined && this.watchedIno === ino) return;
    this.stopWatch();
    try {
      const w = this.deps.watchDir(this.deps.path, () => this.changed());
      w.onError((err) => {
        this.deps.log.warn("watch of static pod folder failed; relying on periodic relist", {
          path: this.deps.path,
          error: err,
        });
        if (this.watch === w) this.stopWatch();
      });
      this.watch = w;
      this.watchedIno = ino;
    } catch (err) {
      this.deps.log.warn("cannot watch static pod folder; relying on periodic relist", {
        path: this.deps.path,
        error: err,
      });
    }
  }

  /** Resolves after a gathered change, after `periodMs`, or when `signal` aborts. */
  waitForChange(periodMs: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (this.dirty || signal.aborted) {
        this.dirty = false;
        resolve();
        return;
      }
      const done = () => {
        cancelTimer();
        signal.removeEventListener("abort", done);
        this.wake = undefined;
        this.dirty = false;
        resolve();
      };
      const cancelTimer = this.deps.clock.setTimer(periodMs, done);
      signal.addEventListener("abort", done, { once: true });
      this.wake = done;
    });
  }

  close(): void {
    this.stopWatch();
    this.cancelWake?.();
    this.cancelWake = undefined;
    this.firstEventAt = undefined;
  }

  private changed(): void {
    const now = this.deps.clock.now();
    this.firstEventAt ??= now;
    const wait = Math.min(this.deps.quietMs, this.firstEventAt + this.deps.maxDelayMs - now);
    this.cancelWake?.();
    this.cancelWake = this.deps.clock.setTimer(Math.max(0, wait), () => {
      this.cancelWake = undefined;
      this.firstEventAt = undefined;
      this.dirty = true;
      this.wake?.();
    });
  }

  private stopWatch(): void {
    this.watch?.close();
    this.watch = undefined;
    this.watchedIno = undefined;
  }
}
