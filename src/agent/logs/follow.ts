// Following a container log across rotation (`fleetlet logs -f`): the file being read is read to
// its end; when the log's path names a new file (the log was rotated and the runtime reopened
// it), the old file is read to its end once more a poll later (the runtime may still have been
// writing to it), then every rotated file that came after it, then the new current file from its
// start. No line is lost or repeated, however many rotations happened in between, as long as
// the files have not been deleted by then.
import { type FSWatcher, watch } from "node:fs";
import { open, stat } from "node:fs/promises";
import { type Clock, realClock } from "../../util/clock.ts";
import type { CriDecoder } from "./cri-format.ts";
import { isMissing, type LogFile, readRange, readRotated } from "./files.ts";
import { COMPRESSED_SUFFIX, readableRotatedFiles } from "./rotated.ts";

/** The file a reader holds; follow replaces it as it moves on (the caller closes the last). */
export interface HeldFile {
  file: LogFile;
}

export interface FollowOptions {
  signal?: AbortSignal;
  pollIntervalMs?: number;
  clock?: Clock;
  /** Also wake as soon as the file changes (inotify), not only every poll interval. */
  watch?: boolean;
}

/** Wakes a waiting reader when the file at `path` changes; polls stay the safety net. */
class ChangeWaker {
  private wake: (() => void) | undefined;
  private changed = false;
  private readonly watcher: FSWatcher | undefined;

  constructor(path: string) {
    try {
      this.watcher = watch(path, { persistent: false }, () => {
        this.changed = true;
        this.wake?.();
      });
      this.watcher.on("error", () => {});
    } catch {
      this.watcher = undefined;
    }
  }

  /** Sleeps `ms` on `clock`, or less when the file changes meanwhile. */
  async sleep(clock: Clock, ms: number, signal: AbortSignal | undefined): Promise<void> {
    if (this.changed) {
      this.changed = false;
      return;
    }
    const sleeper = new AbortController();
    const onAbort = () => sleeper.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    this.wake = () => sleeper.abort(new Error("changed"));
    try {
      await clock.sleep(ms, sleeper.signal);
    } catch (err) {
      if (signal?.aborted) throw err;
    } finally {
      this.wake = undefined;
      this.changed = false;
      signal?.removeEventListener("abort", onAbort);
    }
  }

  close(): void {
    this.watcher?.close();
  }
}

async function inodeOf(path: string): Promise<number | undefined> {
  try {
    return (await stat(path)).ino;
  } catch {
    return undefined;
  }
}

/** Whether `path` names another file than inode `ino` (false while it names none). */
async function replaced(path: string, ino: number): Promise<boolean> {
  const now = await inodeOf(path);
  return now !== undefined && now !== ino;
}

/** The bytes of the first line of a log (without its newline), or undefined when it has none. */
function firstLine(bytes: Uint8Array): string | undefined {
  const nl = bytes.indexOf(10);
  return nl < 0 ? undefined : new TextDecoder().decode(bytes.subarray(0, nl));
}

/** The rotated files (oldest first) that came after the file `old` (inode `oldIno`): found by
 * its inode while it is uncompressed, by its first line once gzipped; when it is gone, all of
 * them (older files are deleted first). */
async function filesAfter(rotated: string[], old: LogFile, oldIno: number): Promise<string[]> {
  for (const [i, p] of rotated.entries()) {
    if (!p.endsWith(COMPRESSED_SUFFIX) && (await inodeOf(p)) === oldIno)
      return rotated.slice(i + 1);
  }
  const head = firstLine(await readRange(old, 0, 4096));
  if (head !== undefined) {
    for (const [i, p] of rotated.entries()) {
      if (!p.endsWith(COMPRESSED_SUFFIX)) continue;
      const bytes = await readRotated(p);
      if (bytes !== undefined && firstLine(bytes.subarray(0, 4096)) === head) {
        return rotated.slice(i + 1);
      }
    }
  }
  return rotated;
}

/** Opens the log's new current file and reads the rotated files between the old one and it. */
async function moveOn(
  path: string,
  old: LogFile,
  oldIno: number,
): Promise<{ file: LogFile; ino: number; between: Uint8Array[] } | undefined> {
  let file: LogFile;
  try {
    file = await open(path, "r");
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw err;
  }
  const ino = (await file.stat()).ino;
  const between: Uint8Array[] = [];
  for (const p of await filesAfter(await readableRotatedFiles(path), old, oldIno)) {
    // The file just opened was rotated meanwhile: it is read next, as the current one.
    if ((await inodeOf(p)) === ino) break;
    const bytes = await readRotated(p);
    if (bytes !== undefined) between.push(bytes);
  }
  return { file, ino, between };
}

/** Yields the lines written to the log at `path` after `pos` in `held.file`, across rotations,
 * until the signal aborts. */
export async function* followLog(
  path: string,
  held: HeldFile,
  pos: number,
  decoder: CriDecoder,
  opts: FollowOptions,
): AsyncGenerator<string> {
  const clock = opts.clock ?? realClock;
  let offset = pos;
  let ino = (await held.file.stat()).ino;
  let rotationSeen = false;
  const waker = opts.watch === true ? new ChangeWaker(path) : undefined;
  try {
    yield* followLoop();
  } finally {
    waker?.close();
  }

  async function* followLoop(): AsyncGenerator<string> {
    while (!opts.signal?.aborted) {
      const size = (await held.file.stat()).size;
      if (size < offset) offset = 0; // truncated: start over
      if (size > offset) {
        const lines = decoder.push(await readRange(held.file, offset, size));
        offset = size;
        if (lines.length > 0) yield lines.join("");
        continue;
      }
      if (await replaced(path, ino)) {
        const next = rotationSeen ? await moveOn(path, held.file, ino) : undefined;
        rotationSeen = true;
        if (next !== undefined) {
          await held.file.close();
          held.file = next.file;
          ino = next.ino;
          offset = 0;
          rotationSeen = false;
          const lines = next.between.flatMap((bytes) => decoder.push(bytes));
          if (lines.length > 0) yield lines.join("");
          continue;
        }
      }
      try {
        if (waker !== undefined) await waker.sleep(clock, opts.pollIntervalMs ?? 250, opts.signal);
        else await clock.sleep(opts.pollIntervalMs ?? 250, opts.signal);
      } catch {
        return;
      }
    }
  }
}
