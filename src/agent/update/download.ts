// The resumable, rate-limited, verifying download of a release from the hub.
//
// The hub serves the release gzip-compressed; the compressed bytes are fetched with HTTP ranges
// and appended to `partPath` as they arrive, so a cut link costs nothing already received. The
// stream that is inflated is the part's bytes (re-read from disk on a resume) followed by the
// network's; its output is hashed, counted and written to `outPath.tmp`. Only when size and
// sha256 match the manifest is it fsynced and renamed to `outPath`, and the part removed.
// Invariants: memory stays a few chunks whatever the release's size; `outPath` is only ever a
// whole, verified executable; a failure removes `outPath.tmp`; the part is removed when its
// bytes are wrong (size, sha256, gzip) and kept otherwise (cut, abort, HTTP error) for a resume.
import { createHash } from "node:crypto";
import { type FileHandle, mkdir, open, rename, rm, stat, truncate } from "node:fs/promises";
import { dirname } from "node:path";
import { readChunks } from "../../release/digest.ts";
import type { ReleaseFields } from "../../release/manifest.ts";
import { abortReason, type Clock, realClock } from "../../util/clock.ts";
import { TokenBucket } from "./bandwidth.ts";
import { DownloadError } from "./errors.ts";
import { openRange, type RangeAnswer } from "./range.ts";

export interface DownloadOptions {
  url: string;
  /** Sent with every request (the node's credential). */
  headers?: Record<string, string>;
  /** What the uncompressed executable must be: the verified manifest's size and sha256. */
  manifest: Pick<ReleaseFields, "size" | "sha256">;
  /** Where the compressed bytes received so far are kept. */
  partPath: string;
  /** Where the verified executable goes (mode 0755). */
  outPath: string;
  /** Bytes a second read from the network; 0 or absent: no limit. */
  bandwidthLimit?: number;
  /** Aborting leaves the part for the next try. */
  signal?: AbortSignal;
  fetch?: (url: string, init: RequestInit) => Promise<Response>;
  clock?: Clock;
}

export interface DownloadResult {
  /** Compressed bytes taken from the part at the start (0: from scratch). */
  resumedFrom: number;
  /** Compressed bytes read from the network by this call. */
  fetched: number;
}

/** The most compressed bytes a release of `size` bytes may take: gzip's worst case (stored
 * blocks) adds far less than 1/256 of the size; more is not the release. */
function maxCompressedSize(size: number): number {
  return size + Math.ceil(size / 256) + 65_536;
}

async function fileLength(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch (err) {
    if ((err as { code?: string }).code === "ENOENT") return 0;
    throw err;
  }
}

/** The inflater is fed at most 64 KiB at a time: it answers each write with output of about
 * the size written, and fetch's chunks of 512 KiB and more cost ~17 MB of peak RSS more on a
 * 100 MB release (scripts/bench/update-download.ts). */
const FEED = 65_536;

function* slices(chunk: Uint8Array): Generator<Uint8Array> {
  for (let i = 0; i < chunk.length; i += FEED) yield chunk.subarray(i, i + FEED);
}

interface Counters {
  fetched: number;
}

/** The compressed stream: the part's bytes before `answer.start`, then the network's, each
 * network chunk appended to the part (and paid for in the bandwidth limit) before it is used. */
async function* compressed(
  o: DownloadOptions,
  answer: RangeAnswer,
  counters: Counters,
): AsyncGenerator<Uint8Array> {
  if (answer.start > 0) yield* readChunks(o.partPath, 0, FEED, o.signal);
  const limit = maxCompressedSize(o.manifest.size);
  const bucket = o.bandwidthLimit
    ? new TokenBucket(o.bandwidthLimit, o.clock ?? realClock)
    : undefined;
  const part = await open(o.partPath, answer.start > 0 ? "a" : "w", 0o600);
  let at = answer.start;
  try {
    const body = answer.res.body;
    if (body === null) throw new DownloadError("interrupted", `GET ${o.url}: no body`);
    for await (const chunk of body) {
      at += chunk.length;
      if (at > limit) {
        throw new DownloadError(
          "size",
          `the release's compressed bytes pass ${limit}, far more than a release of ${o.manifest.size} bytes takes`,
        );
      }
      await writeAll(part, chunk);
      counters.fetched += chunk.length;
      await bucket?.take(chunk.length, o.signal);
      yield* slices(chunk);
    }
  } catch (err) {
    if (err instanceof DownloadError || o.signal?.aborted) throw err;
    throw new DownloadError(
      "interrupted",
      `GET ${o.url}: cut after ${at} compressed bytes: ${(err as Error).message}`,
    );
  } finally {
    await part.close();
  }
  if (answer.total !== undefined && at < answer.total) {
    throw new DownloadError(
      "interrupted",
      `GET ${o.url}: ended after ${at} of ${answer.total} compressed bytes`,
    );
  }
}

async function writeAll(file: FileHandle, bytes: Uint8Array): Promise<void> {
  let off = 0;
  while (off < bytes.length) {
    const { bytesWritten } = await file.write(bytes, off, bytes.length - off);
    off += bytesWritten;
  }
}

/** A byte stream pulling from `source` one chunk at a time; cancelling it ends `source`. */
function streamOf(source: AsyncIterable<Uint8Array>): ReadableStream<Uint8Array<ArrayBuffer>> {
  const it = source[Symbol.asyncIterator]();
  return new ReadableStream<Uint8Array<ArrayBuffer>>({
    async pull(controller) {
      const r = await it.next();
      if (r.done) controller.close();
      // Chunks from fetch and from files are never on shared memory.
      else controller.enqueue(r.value as Uint8Array<ArrayBuffer>);
    },
    async cancel() {
      await it.return?.();
    },
  });
}

/** Inflates `source` into `out`, hashing and counting; checks size and sha256 at the end. */
async function inflateInto(
  source: AsyncIterable<Uint8Array>,
  out: FileHandle,
  o: DownloadOptions,
): Promise<void> {
  const want = o.manifest;
  const hash = createHash("sha256");
  let n = 0;
  const stream = streamOf(source).pipeThrough(new DecompressionStream("gzip"));
  for await (const chunk of stream) {
    n += chunk.length;
    if (n > want.size) {
      throw new DownloadError(
        "size",
        `size mismatch: the release inflates past the manifest's ${want.size} bytes`,
      );
    }
    hash.update(chunk);
    await writeAll(out, chunk);
  }
  if (n !== want.size) {
    throw new DownloadError(
      "size",
      `size mismatch: the release has ${n} bytes, the manifest says ${want.size}`,
    );
  }
  const got = hash.digest("hex");
  if (got !== want.sha256) {
    throw new DownloadError(
      "sha256",
      `sha256 mismatch: the release has ${got}, the manifest says ${want.sha256}`,
    );
  }
}

/** A failure of the inflate step, as a DownloadError (gzip's own errors become "gzip"). */
function classify(err: unknown, o: DownloadOptions): unknown {
  if (err instanceof DownloadError) return err;
  if (o.signal?.aborted) return abortReason(o.signal);
  return new DownloadError(
    "gzip",
    `the release from ${o.url} is not valid gzip: ${(err as Error).message}`,
  );
}

/** fsync of a folder, so that a rename in it survives a power cut (where the platform allows). */
async function syncFolder(dir: string): Promise<void> {
  const fd = await open(dir, "r").catch(() => undefined);
  try {
    await fd?.sync();
  } catch {
    // not supported here
  } finally {
    await fd?.close();
  }
}

/**
 * Downloads, inflates and verifies the release at `o.url` into `o.outPath`, resuming from
 * `o.partPath` when it holds bytes of an earlier try. One HTTP attempt (two when the server
 * makes it start over): on a cut link it throws DownloadError("interrupted") and a later call
 * resumes. Throws DownloadError, or the signal's reason when aborted.
 */
export async function downloadRelease(o: DownloadOptions): Promise<DownloadResult> {
  await mkdir(dirname(o.partPath), { recursive: true, mode: 0o700 });
  await mkdir(dirname(o.outPath), { recursive: true, mode: 0o755 });
  let start = await fileLength(o.partPath);
  if (start > maxCompressedSize(o.manifest.size)) start = 0;
  const restart = () => truncate(o.partPath, 0).catch(() => {});
  if (start === 0) await restart();
  const answer = await openRange(o.fetch ?? fetch, o.url, o.headers, start, restart, o.signal);
  const tmp = `${o.outPath}.tmp`;
  const counters = { fetched: 0 };
  const out = await open(tmp, "w", 0o755);
  try {
    try {
      await inflateInto(compressed(o, answer, counters), out, o);
    } catch (err) {
      throw classify(err, o);
    }
    await out.sync();
  } catch (err) {
    await out.close();
    // A failure while the part was still being re-read leaves the response unread: let it go.
    await answer.res.body?.cancel().catch(() => {});
    await rm(tmp, { force: true });
    if (err instanceof DownloadError && ["size", "sha256", "gzip"].includes(err.reason)) {
      await rm(o.partPath, { force: true });
    }
    throw err;
  }
  await out.close();
  await rename(tmp, o.outPath);
  await rm(o.partPath, { force: true });
  await syncFolder(dirname(o.outPath)); // the rename and the part's removal, both durable
  return { resumedFrom: answer.start, fetched: counters.fetched };
}
