// Container logs in the CRI format, laid out as kubelet does:
//   <podLogsDir>/<namespace>_<name>_<uid>/<container>/<restartCount>.log
// Each record is one line "<RFC3339Nano> <stdout|stderr> <F|P>[:tags] <text>"; a P (partial)
// record continues in the next record, and the F record ends the logical line.
import { open } from "node:fs/promises";
import { join } from "node:path";
import type { Pod } from "../../api/types.ts";
import { type Clock, realClock } from "../../util/clock.ts";

/** The log file does not exist; callers answer "not found" rather than an internal error. */
export class LogNotFoundError extends Error {
  constructor(readonly path: string) {
    super(`log file ${JSON.stringify(path)} does not exist`);
    this.name = "LogNotFoundError";
  }
}

export interface CriLogRecord {
  /** The timestamp exactly as written (RFC 3339 with nanoseconds). */
  time: string;
  stream: "stdout" | "stderr";
  /** True for a P record: the line continues in the next record. */
  partial: boolean;
  text: string;
}

const recordRe = /^(\S+) (stdout|stderr) ([FP])(?::\S*)?(?: (.*))?$/s;

/** Parses one record (without its trailing newline); undefined when it is not CRI format. */
export function parseCriLine(line: string): CriLogRecord | undefined {
  const m = recordRe.exec(line);
  if (!m) return undefined;
  const [, time = "", stream, tag, text = ""] = m;
  return { time, stream: stream === "stderr" ? "stderr" : "stdout", partial: tag === "P", text };
}

/** The directory of one pod's logs. */
export function podLogDir(
  podLogsDir: string,
  namespace: string,
  name: string,
  uid: string,
): string {
  return join(podLogsDir, `${namespace}_${name}_${uid}`);
}

/**
 * The log file of a container of `pod` by kubelet's layout: the current run's file, or with
 * `previous` the run before it (restartCount - 1). Undefined when the pod has no uid, the
 * container has no status yet, or there is no previous run.
 */
export function containerLogPath(
  podLogsDir: string,
  pod: Pod,
  container: string,
  previous: boolean,
): string | undefined {
  const uid = pod.metadata.uid;
  if (uid === undefined) return undefined;
  const statuses = [
    ...(pod.status?.initContainerStatuses ?? []),
    ...(pod.status?.containerStatuses ?? []),
  ];
  const status = statuses.find((s) => s.name === container);
  if (status === undefined) return undefined;
  const run = previous ? status.restartCount - 1 : status.restartCount;
  if (run < 0) return undefined;
  const dir = podLogDir(podLogsDir, pod.metadata.namespace ?? "default", pod.metadata.name, uid);
  return join(dir, container, `${run}.log`);
}

export interface ReadLogOptions {
  /** Only the last N lines (N >= 0); all when absent or negative. */
  tailLines?: number;
  /** Prefix every line with its RFC 3339 timestamp and a space, as `kubectl logs --timestamps`. */
  timestamps?: boolean;
  /** Keep reading lines appended to the file until `signal` aborts. */
  follow?: boolean;
  /** Stops reading (follow or not); the iterator then ends without an error. */
  signal?: AbortSignal;
  /** How often a followed file is checked for new data; 250 ms by default. */
  pollIntervalMs?: number;
  clock?: Clock;
}

/** Turns CRI records into output lines, joining partial records. */
class CriDecoder {
  private rest = "";
  private partial = "";
  private partialTime: string | undefined;
  private readonly utf8 = new TextDecoder();

  constructor(private readonly timestamps: boolean) {}

  /** Complete logical lines (each ending in "\n") found in the next bytes of the file. */
  push(bytes: Uint8Array): string[] {
    const records = (this.rest + this.utf8.decode(bytes, { stream: true })).split("\n");
    this.rest = records.pop() ?? "";
    const out: string[] = [];
    for (const raw of records) {
      const rec = parseCriLine(raw);
      if (rec === undefined) {
        out.push(`${raw}\n`);
        continue;
      }
      this.partialTime ??= rec.time;
      this.partial += rec.text;
      if (rec.partial) continue;
      out.push(this.line(`${this.partial}\n`));
      this.partial = "";
      this.partialTime = undefined;
    }
    return out;
  }

  /** What is left at the end of the file: a partial line, printed without a newline. */
  flush(): string | undefined {
    const rec = this.rest === "" ? undefined : parseCriLine(this.rest);
    const text = this.partial + (rec?.text ?? this.rest);
    this.partialTime ??= rec?.time;
    return text === "" ? undefined : this.line(text);
  }

  private line(text: string): string {
    return this.timestamps && this.partialTime !== undefined ? `${this.partialTime} ${text}` : text;
  }
}

const BLOCK = 64 * 1024;

type LogFile = Awaited<ReturnType<typeof open>>;

/**
 * Where to start reading so that at least `n` complete lines follow: the start of a record with
 * more than `n` full (F) records after it, or 0. Reads the file backwards in blocks.
 */
async function tailOffset(file: LogFile, size: number, n: number): Promise<number> {
  let pos = size;
  let carry = new Uint8Array(0);
  let full = 0;
  while (pos > 0) {
    const len = Math.min(BLOCK, pos);
    pos -= len;
    const chunk = new Uint8Array(len + carry.length);
    await file.read(chunk, 0, len, pos);
    chunk.set(carry, len);
    const firstNewline = pos === 0 ? -1 : chunk.indexOf(10);
    if (firstNewline < 0 && pos > 0) {
      carry = chunk;
      continue;
    }
    const text = new TextDecoder().decode(chunk.subarray(firstNewline + 1));
    const lines = text.split("\n").filter((l) => l !== "");
    for (let i = lines.length - 1; i >= 0; i--) {
      if (parseCriLine(lines[i] ?? "")?.partial !== true) full++;
    }
    if (full > n) return pos + firstNewline + 1;
    carry = chunk.subarray(0, firstNewline + 1);
  }
  return 0;
}

async function readRange(file: LogFile, from: number, to: number): Promise<Uint8Array> {
  const buf = new Uint8Array(to - from);
  let done = 0;
  while (done < buf.length) {
    const { bytesRead } = await file.read(buf, done, buf.length - done, from + done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return buf.subarray(0, done);
}

async function openLog(path: string): Promise<LogFile> {
  try {
    return await open(path, "r");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") throw new LogNotFoundError(path);
    throw new Error(`cannot open log file ${JSON.stringify(path)}: ${(err as Error).message}`);
  }
}

/**
 * Output of a CRI log file as chunks of text, CRI prefixes stripped and partial records joined.
 * Throws LogNotFoundError on the first iteration when the file does not exist.
 */
export async function* readLog(path: string, opts: ReadLogOptions = {}): AsyncGenerator<string> {
  const file = await openLog(path);
  const decoder = new CriDecoder(opts.timestamps === true);
  try {
    const size = (await file.stat()).size;
    const tail = opts.tailLines !== undefined && opts.tailLines >= 0 ? opts.tailLines : undefined;
    let offset = tail === undefined ? 0 : tail === 0 ? size : await tailOffset(file, size, tail);
    const kept: string[] = [];
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
    if (kept.length > 0) yield kept.join("");
    if (opts.follow === true) {
      yield* follow(file, offset, decoder, opts);
      return;
    }
    const rest = decoder.flush();
    if (rest !== undefined && !opts.signal?.aborted) yield rest;
  } finally {
    await file.close();
  }
}

async function* follow(
  file: LogFile,
  start: number,
  decoder: CriDecoder,
  opts: ReadLogOptions,
): AsyncGenerator<string> {
  const clock = opts.clock ?? realClock;
  let offset = start;
  while (!opts.signal?.aborted) {
    const size = (await file.stat()).size;
    if (size < offset) offset = 0; // truncated: start over
    if (size > offset) {
      const lines = decoder.push(await readRange(file, offset, size));
      offset = size;
      if (lines.length > 0) yield lines.join("");
      continue;
    }
    try {
      await clock.sleep(opts.pollIntervalMs ?? 250, opts.signal);
    } catch {
      return;
    }
  }
}
