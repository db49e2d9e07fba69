// Opening and reading container log files: the current file by handle, rotated ones (plain or
// gzipped) whole.
import { open, readFile } from "node:fs/promises";
import { COMPRESSED_SUFFIX } from "./rotated.ts";

/** The log file does not exist; callers answer "not found" rather than an internal error. */
export class LogNotFoundError extends Error {
  constructor(readonly path: string) {
    super(`log file ${JSON.stringify(path)} does not exist`);
    this.name = "LogNotFoundError";
  }
}

export type LogFile = Awaited<ReturnType<typeof open>>;

/** Reads `len` bytes at `pos` (fewer at the end). */
export type ReadAt = (pos: number, len: number) => Promise<Uint8Array>;

export const isMissing = (err: unknown) => (err as NodeJS.ErrnoException).code === "ENOENT";

export async function openLog(path: string): Promise<LogFile> {
  try {
    return await open(path, "r");
  } catch (err) {
    if (isMissing(err)) throw new LogNotFoundError(path);
    throw new Error(`cannot open log file ${JSON.stringify(path)}: ${(err as Error).message}`);
  }
}

export async function readRange(file: LogFile, from: number, to: number): Promise<Uint8Array> {
  const buf = new Uint8Array(Math.max(0, to - from));
  let done = 0;
  while (done < buf.length) {
    const { bytesRead } = await file.read(buf, done, buf.length - done, from + done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return buf.subarray(0, done);
}

export const fileReader =
  (file: LogFile): ReadAt =>
  (pos, len) =>
    readRange(file, pos, pos + len);

export const bufferReader =
  (buf: Uint8Array): ReadAt =>
  async (pos, len) =>
    buf.subarray(pos, pos + len);

/** A rotated file's whole content, decompressed if gzipped. When the plain file was compressed
 * since it was listed, its ".gz" is read instead; undefined when neither exists. */
export async function readRotated(path: string): Promise<Uint8Array | undefined> {
  const gz = path.endsWith(COMPRESSED_SUFFIX);
  try {
    const bytes = new Uint8Array(await readFile(path));
    return gz ? Bun.gunzipSync(bytes) : bytes;
  } catch (err) {
    if (!isMissing(err)) throw err;
    return gz ? undefined : readRotated(`${path}${COMPRESSED_SUFFIX}`);
  }
}
