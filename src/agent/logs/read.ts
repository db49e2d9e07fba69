// Reading a container log for `fleetlet logs`: the current file, the last N lines (reaching into
// the rotated files when the current one has fewer), and following it across rotations.
import type { Clock } from "../../util/clock.ts";
import { CriDecoder } from "./cri-format.ts";
import { isMissing, type LogFile, LogNotFoundError, openLog, readRange } from "./files.ts";
import { followLog, type HeldFile } from "./follow.ts";
import { readableRotatedFiles } from "./rotated.ts";
import { tailBytes } from "./tail.ts";

export interface ReadLogOptions {
  /** Only the last N lines (N >= 0); all when absent or negative. */
  tailLines?: number;
  /** Prefix every line with its RFC 3339 timestamp and a space, as `kubectl logs --timestamps`. */
  timestamps?: boolean;
  /** Only lines written at or after this time (ms since the epoch), as `logs --since`. */
  since?: number;
  /** Keep reading lines appended to the log (across rotations) until `signal` aborts. */
  follow?: boolean;
  /** Stops reading (follow or not); the iterator then ends without an error. */
  signal?: AbortSignal;
  /** Wake a follower as soon as the file changes (inotify), besides polling. */
  watch?: boolean;
  /** How often a followed file is checked for new data; 250 ms by default. */
  pollIntervalMs?: number;
  clock?: Clock;
}

const BLOCK = 64 * 1024;

/** Whether the log at `path` can be read: its current file, or a rotated one while the runtime
 * reopens it. */
export async function logExists(path: string): Promise<boolean> {
  if (await Bun.file(path).exists()) return true;
  return (await readableRotatedFiles(path)).length > 0;
}

/** The file to read and the rotated files before it: the current file, or (between a rotation
 * and the runtime reopening the log) the newest rotated one. */
async function openCurrent(path: string): Promise<{ file: LogFile; before: string[] }> {
  try {
    const file = await openLog(path);
    return { file, before: await readableRotatedFiles(path) };
  } catch (err) {
    if (!(err instanceof LogNotFoundError)) throw err;
    const rotated = await readableRotatedFiles(path);
    const newest = rotated.at(-1);
    if (newest === undefined || newest.endsWith(".gz")) throw err;
    try {
      return { file: await openLog(newest), before: rotated.slice(0, -1) };
    } catch (again) {
      if (again instanceof LogNotFoundError || isMissing(again)) throw err;
      throw again;
    }
  }
}

/**
 * Output of a CRI log as chunks of text, CRI prefixes stripped and partial records joined.
 * Throws LogNotFoundError on the first iteration when the log does not exist.
 */
export async function* readLog(path: string, opts: ReadLogOptions = {}): AsyncGenerator<string> {
  const { file, before } = await openCurrent(path);
  const held: HeldFile = { file };
  const decoder = new CriDecoder(opts.timestamps === true, opts.since);
  try {
    const size = (await file.stat()).size;
    const tail = opts.tailLines !== undefined && opts.tailLines >= 0 ? opts.tailLines : undefined;
    let offset = 0;
    const kept: string[] = [];
    if (tail !== undefined) {
      const found =
        tail === 0 ? { older: [], offset: size } : await tailBytes(file, size, before, tail);
      offset = found.offset;
      for (const bytes of found.older) kept.push(...decoder.push(bytes));
    }
    while (offset < size && !opts.signal?.aborted) {
      const to = Math.min(size, offset + BLOCK * 16);
      const lines = decoder.push(await readRange(file, offset, to));
      offset = to;
      if (tail === undefined) {
        if (lines.length > 0) yield lines.join("");
        continue;
      }
      kept.push(...lines);
      if (kept.length > tail) kept.splice(0, kept.length - tail);
    }
    if (tail !== undefined && kept.length > tail) kept.splice(0, kept.length - tail);
    if (kept.length > 0) yield kept.join("");
    if (opts.follow === true) {
      yield* followLog(path, held, offset, decoder, opts);
      return;
    }
    const rest = decoder.flush();
    if (rest !== undefined && !opts.signal?.aborted) yield rest;
  } finally {
    await held.file.close();
  }
}
