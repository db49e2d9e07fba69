// The size and sha256 of a file, read in fixed chunks: an executable is ~100 MB and a device's
// memory is small, so the file is never held whole.
import { createHash } from "node:crypto";
import { open } from "node:fs/promises";

const CHUNK = 1 << 20;

export interface FileDigest {
  size: number;
  /** 64 lowercase hex digits. */
  sha256: string;
}

/** Streams the file at `path` through sha256. */
export async function digestFile(path: string, signal?: AbortSignal): Promise<FileDigest> {
  const file = await open(path, "r");
  try {
    const hash = createHash("sha256");
    const buf = Buffer.allocUnsafe(CHUNK);
    let size = 0;
    for (;;) {
      signal?.throwIfAborted();
      const { bytesRead } = await file.read(buf, 0, CHUNK, size);
      if (bytesRead === 0) break;
      hash.update(buf.subarray(0, bytesRead));
      size += bytesRead;
    }
    return { size, sha256: hash.digest("hex") };
  } finally {
    await file.close();
  }
}

/** Yields the file's bytes from `start` in chunks of at most `size` bytes (each a fresh buffer). */
export async function* readChunks(
  path: string,
  start = 0,
  size = CHUNK,
  signal?: AbortSignal,
): AsyncGenerator<Uint8Array> {
  const file = await open(path, "r");
  try {
    let at = start;
    for (;;) {
      signal?.throwIfAborted();
      const buf = Buffer.allocUnsafe(size);
      const { bytesRead } = await file.read(buf, 0, size, at);
      if (bytesRead === 0) return;
      at += bytesRead;
      yield buf.subarray(0, bytesRead);
    }
  } finally {
    await file.close();
  }
}
