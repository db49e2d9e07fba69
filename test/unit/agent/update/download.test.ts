import { afterEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type DownloadOptions, downloadRelease } from "../../../../src/agent/update/download.ts";
import { DownloadError } from "../../../../src/agent/update/errors.ts";
import { FakeClock } from "../../../../src/util/clock.ts";
import { ReleaseServer } from "../../../lib/release-server.ts";

/** 1 MiB that gzip halves or so: pseudo-random bytes, then text. */
function makeBlob(size = 1 << 20): Uint8Array<ArrayBuffer> {
  const b = new Uint8Array(size);
  let x = 0x12345678;
  for (let i = 0; i < size / 2; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b[i] = x & 0xff;
  }
  const text = new TextEncoder().encode("fleetlet release bytes ");
  for (let i = size / 2; i < size; i++) b[i] = text[i % text.length] ?? 0;
  return b;
}

const blob = makeBlob();
const gz = Bun.gzipSync(blob);
const manifest = { size: blob.length, sha256: createHash("sha256").update(blob).digest("hex") };

let server: ReleaseServer | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

async function serve(
  body: Uint8Array,
  opts: { ignoreRange?: boolean; gzipEncoding?: boolean } = {},
) {
  server = await ReleaseServer.start(body, opts);
  return server;
}

function paths(): Pick<DownloadOptions, "partPath" | "outPath"> {
  const dir = mkdtempSync(join(tmpdir(), "download-"));
  return { partPath: join(dir, "download/abc.part"), outPath: join(dir, "versions/v1/fleetlet") };
}

async function failure(p: Promise<unknown>): Promise<DownloadError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof DownloadError) return err;
    throw err;
  }
  throw new Error("the download did not fail");
}

/** Runs a download that the server holds after `at` compressed bytes and cuts once the part has
 * them all; returns its failure. */
async function cutAt(s: ReleaseServer, opts: DownloadOptions, at: number): Promise<DownloadError> {
  s.holdNextAfter = at;
  const run = failure(downloadRelease(opts));
  const size = () => (existsSync(opts.partPath) ? statSync(opts.partPath).size : 0);
  for (let i = 0; i < 2000 && size() < at; i++) await Bun.sleep(5);
  expect(size()).toBe(at);
  s.cut();
  return run;
}

describe("downloadRelease()", () => {
  test("downloads, inflates and verifies a release; the part is removed and the executable is 0755", async () => {
    const s = await serve(gz);
    const p = paths();
    const r = await downloadRelease({ url: s.url, manifest, ...p });
    expect(r).toEqual({ resumedFrom: 0, fetched: gz.length });
    expect(Buffer.compare(readFileSync(p.outPath), Buffer.from(blob))).toBe(0);
    expect(statSync(p.outPath).mode & 0o777).toBe(0o755);
    expect(existsSync(p.partPath)).toBe(false);
    expect(existsSync(`${p.outPath}.tmp`)).toBe(false);
    expect(s.served).toBe(gz.length);
  });

  test("a download cut in the middle keeps its part and resumes from it; the bytes served stay the compressed size", async () => {
    const s = await serve(gz);
    const p = paths();
    const kept = Math.floor(gz.length / 2);
    const cut = await cutAt(s, { url: s.url, manifest, ...p }, kept);
    expect(cut.reason).toBe("interrupted");
    expect(existsSync(p.outPath)).toBe(false);
    const r = await downloadRelease({ url: s.url, manifest, ...p });
    expect(r).toEqual({ resumedFrom: kept, fetched: gz.length - kept });
    expect(s.ranges).toEqual([null, `bytes=${kept}-`]);
    expect(s.served).toBe(gz.length);
    expect(Buffer.compare(readFileSync(p.outPath), Buffer.from(blob))).toBe(0);
  });

  test("a server that ignores Range (200) makes the resume start over, and it still ends right", async () => {
    const s = await serve(gz, { ignoreRange: true });
    const p = paths();
    expect((await cutAt(s, { url: s.url, manifest, ...p }, 100_000)).reason).toBe("interrupted");
    const r = await downloadRelease({ url: s.url, manifest, ...p });
    expect(r).toEqual({ resumedFrom: 0, fetched: gz.length });
    expect(Buffer.compare(readFileSync(p.outPath), Buffer.from(blob))).toBe(0);
  });

  test("a server that labels the release Content-Encoding: gzip still gives the compressed bytes, and a resume works", async () => {
    const s = await serve(gz, { gzipEncoding: true });
    const p = paths();
    await cutAt(s, { url: s.url, manifest, ...p }, 200_000);
    const r = await downloadRelease({ url: s.url, manifest, ...p });
    expect(r).toEqual({ resumedFrom: 200_000, fetched: gz.length - 200_000 });
    expect(Buffer.compare(readFileSync(p.outPath), Buffer.from(blob))).toBe(0);
  });

  test("a 206 that starts elsewhere than the part ends is not appended: the download starts over", async () => {
    const s = await serve(gz);
    const p = paths();
    await cutAt(s, { url: s.url, manifest, ...p }, 100_000);
    const asked: (string | null)[] = [];
    // A server that answers every range from byte 0.
    const fromZero = async (url: string, init: RequestInit) => {
      const range = new Headers(init.headers).get("range");
      asked.push(range);
      const res = await fetch(url, { ...init, headers: { "accept-encoding": "identity" } });
      if (range === null) return res;
      const headers = { "content-range": `bytes 0-${gz.length - 1}/${gz.length}` };
      return new Response(res.body, { status: 206, headers });
    };
    const r = await downloadRelease({ url: s.url, manifest, ...p, fetch: fromZero });
    expect(asked).toEqual(["bytes=100000-", null]);
    expect(r).toEqual({ resumedFrom: 0, fetched: gz.length });
    expect(Buffer.compare(readFileSync(p.outPath), Buffer.from(blob))).toBe(0);
  });

  test("a part longer than the release (416) starts over", async () => {
    const s = await serve(gz);
    const p = paths();
    await downloadRelease({
      url: s.url,
      manifest,
      outPath: `${p.outPath}.first`,
      partPath: p.partPath,
    });
    writeFileSync(p.partPath, new Uint8Array(gz.length + 10));
    const r = await downloadRelease({ url: s.url, manifest, ...p });
    expect(r.resumedFrom).toBe(0);
    expect(s.ranges.at(-2)).toBe(`bytes=${gz.length + 10}-`);
    expect(s.ranges.at(-1)).toBe(null);
    expect(Buffer.compare(readFileSync(p.outPath), Buffer.from(blob))).toBe(0);
  });

  test("changed bytes are a sha256 mismatch: nothing is left at outPath, and the part is removed", async () => {
    const other = blob.slice();
    other[123_456] = (other[123_456] ?? 0) ^ 0x40;
    const s = await serve(Bun.gzipSync(other));
    const p = paths();
    const err = await failure(downloadRelease({ url: s.url, manifest, ...p }));
    expect(err.reason).toBe("sha256");
    expect(err.message).toContain(`the manifest says ${manifest.sha256}`);
    for (const f of [p.outPath, `${p.outPath}.tmp`, p.partPath]) expect(existsSync(f)).toBe(false);
  });

  test("a release shorter or longer than the manifest's size is a size mismatch", async () => {
    const s = await serve(gz);
    for (const size of [blob.length + 1, blob.length - 1]) {
      const p = paths();
      const err = await failure(
        downloadRelease({ url: s.url, manifest: { ...manifest, size }, ...p }),
      );
      expect(err.reason).toBe("size");
      expect(err.message).toContain("size mismatch");
      for (const f of [p.outPath, `${p.outPath}.tmp`, p.partPath])
        expect(existsSync(f)).toBe(false);
    }
  });

  test("bytes that are not gzip fail as gzip and remove the part", async () => {
    const s = await serve(blob.subarray(0, 200_000));
    const p = paths();
    const err = await failure(downloadRelease({ url: s.url, manifest, ...p }));
    expect(err.reason).toBe("gzip");
    expect(existsSync(p.partPath)).toBe(false);
  });

  test("an HTTP error is reported with its status and keeps the part", async () => {
    const s = await serve(gz);
    const p = paths();
    await cutAt(s, { url: s.url, manifest, ...p }, 50_000);
    const err = await failure(
      downloadRelease({
        url: `${s.url}x`,
        manifest,
        ...p,
        fetch: async () => new Response("no", { status: 503, statusText: "Service Unavailable" }),
      }),
    );
    expect(err.reason).toBe("http");
    expect(err.message).toContain("503 Service Unavailable");
    expect(statSync(p.partPath).size).toBeGreaterThan(0);
  });

  test("an abort through the signal rejects with its reason and leaves the part for the next try", async () => {
    const s = await serve(gz);
    const p = paths();
    const ac = new AbortController();
    // Aborts once the first chunk of the body has passed.
    const fetchThenAbort = async (url: string, init: RequestInit) => {
      const res = await fetch(url, init);
      const tap = new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, c) {
          c.enqueue(chunk);
          ac.abort(new Error("stopped by the test"));
        },
      });
      return new Response(res.body?.pipeThrough(tap), { status: res.status, headers: res.headers });
    };
    const opts = { url: s.url, manifest, ...p, signal: ac.signal, fetch: fetchThenAbort };
    await expect(downloadRelease(opts)).rejects.toThrow("stopped by the test");
    const kept = statSync(p.partPath).size;
    expect(kept).toBeGreaterThan(0);
    expect(existsSync(`${p.outPath}.tmp`)).toBe(false);
    const r = await downloadRelease({ url: s.url, manifest, ...p });
    expect(r.resumedFrom).toBe(kept);
    expect(Buffer.compare(readFileSync(p.outPath), Buffer.from(blob))).toBe(0);
  });

  test("with a bandwidth limit it waits on its clock for the bytes it read: (bytes - burst) / rate", async () => {
    const s = await serve(gz);
    const clock = new FakeClock();
    const rate = 256 * 1024;
    let done = false;
    const run = downloadRelease({
      url: s.url,
      manifest,
      ...paths(),
      bandwidthLimit: rate,
      clock,
    }).finally(() => {
      done = true;
    });
    const start = clock.monotonic();
    while (!done) {
      await Bun.sleep(0);
      if (clock.pending > 0) {
        clock.step(1);
      }
    }
    await run;
    const waited = clock.monotonic() - start;
    const least = ((gz.length - rate / 8) / rate) * 1000;
    expect(waited).toBeGreaterThanOrEqual(least - 1);
    expect(waited).toBeLessThanOrEqual((gz.length / rate) * 1000 + 50);
  }, 30_000);
});
