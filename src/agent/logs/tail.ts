// `--tail N` of a container log: the last N lines, taken from the current file and, when it has
// fewer, from the rotated files before it, newest first.
import { parseCriLine } from "./cri-format.ts";
import { bufferReader, fileReader, type LogFile, type ReadAt, readRotated } from "./files.ts";

const BLOCK = 64 * 1024;

/**
 * Where to start reading so that at least `n` complete lines follow: the start of a record with
 * more than `n` full (F) records after it, or 0. Reads backwards in blocks; `full` is the number
 * of full records from `offset` to the end.
 */
async function tailOffset(
  read: ReadAt,
  size: number,
  n: number,
): Promise<{ offset: number; full: number }> {
  let pos = size;
  let carry = new Uint8Array(0);
  let full = 0;
  while (pos > 0) {
    const len = Math.min(BLOCK, pos);
    pos -= len;
    const chunk = new Uint8Array(len + carry.length);
    chunk.set(await read(pos, len), 0);
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
    if (full > n) return { offset: pos + firstNewline + 1, full };
    carry = chunk.subarray(0, firstNewline + 1);
  }
  return { offset: 0, full };
}

/**
 * The bytes holding the last `n` lines of a log whose file being read is `file` (of `size`
 * bytes) and whose files before it are `before` (rotated files, oldest first): the parts of
 * those files needed, oldest first, and where to start in `file`.
 */
export async function tailBytes(
  file: LogFile,
  size: number,
  before: readonly string[],
  n: number,
): Promise<{ older: Uint8Array[]; offset: number }> {
  const current = await tailOffset(fileReader(file), size, n);
  const older: Uint8Array[] = [];
  let missing = n - current.full;
  if (current.offset > 0 || missing <= 0) return { older, offset: current.offset };
  for (let i = before.length - 1; i >= 0 && missing > 0; i--) {
    const bytes = await readRotated(before[i] ?? "");
    if (bytes === undefined) continue;
    const part = await tailOffset(bufferReader(bytes), bytes.length, missing);
    older.unshift(bytes.subarray(part.offset));
    missing -= part.full;
  }
  return { older, offset: current.offset };
}
