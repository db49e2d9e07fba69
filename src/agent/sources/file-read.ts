// Reading one entry of the manifest folder: which names are manifests, bounded reads that never
// block on a fifo, and contents that look cut off mid-write.

import { constants, type Stats } from "node:fs";
import { open, stat } from "node:fs/promises";
import type { Logger } from "../../util/log.ts";

/** What reading one folder entry found. */
export type EntryRead =
  | { kind: "absent" }
  | { kind: "too-large"; size: number }
  | { kind: "not-a-file"; what: string }
  | { kind: "unreadable"; message: string }
  | { kind: "content"; content: Buffer };

/** Names that are never manifests: hidden files, editor backups, swap and temp files. */
export function isIgnoredManifestName(name: string): boolean {
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
export function unfinishedWrite(content: Buffer): string | undefined {
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

/** Reads one folder entry; touches no state, so that entries can be read at once. */
export async function readEntry(path: string, max: number, log: Logger): Promise<EntryRead> {
  let info: Stats;
  try {
    info = await stat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
      log.warn("cannot stat manifest", { path, error: err });
    }
    return { kind: "absent" };
  }
  if (info.isDirectory()) {
    log.debug("not recursing into folder", { path });
    return { kind: "absent" };
  }
  if (!info.isFile()) return { kind: "not-a-file", what: fileKind(info) };
  if (info.size > max) return { kind: "too-large", size: info.size };
  try {
    return await readBounded(path, max);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { kind: "absent" };
    return { kind: "unreadable", message: (err as Error).message };
  }
}
