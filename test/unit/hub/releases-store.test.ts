// The hub's release store (src/hub/releases/store.ts) on a temp folder: its layout, idempotent
// and conflicting pushes, refused uploads (size, sha256, limit, malformed manifest), and that a
// failed upload leaves nothing visible.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { StatusError } from "../../../src/api/status.ts";
import { ReleaseStore } from "../../../src/hub/releases/store.ts";
import { type Arch, serializeManifest } from "../../../src/release/manifest.ts";
import { releaseStoreContract } from "../../lib/release-store-contract.ts";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "release-store-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** Bytes that compress (a repeated pattern with a varying part), `n` long. */
function executable(n: number, seed = 1): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = (i % 251) ^ ((Math.floor(i / 4096) * seed) % 7);
  return b;
}

function manifestOf(bytes: Uint8Array, version = "0.2.0", arch: Arch = "amd64"): string {
  const sha256 = createHash("sha256").update(bytes).digest("hex");
  return serializeManifest({
    version,
    arch,
    size: bytes.length,
    sha256,
    signature: new Uint8Array(64),
  });
}

/** An upload whose body streams `chunks` (a request's body, as the hub gets it). */
function upload(chunks: AsyncIterable<Uint8Array>): Response {
  const it = chunks[Symbol.asyncIterator]();
  const stream = new ReadableStream<Uint8Array>({
    async pull(c) {
      const r = await it.next();
      if (r.done) c.close();
      else c.enqueue(r.value);
    },
  });
  return new Response(stream);
}

/** The bytes as an upload of 64 KiB chunks; `failAfter`: fails (a cut upload) after that many. */
function body(bytes: Uint8Array, failAfter?: number): Response {
  async function* chunks(): AsyncGenerator<Uint8Array> {
    for (let i = 0; i < bytes.length; i += 65_536) {
      if (failAfter !== undefined && i >= failAfter) throw new Error("connection reset");
      yield bytes.subarray(i, i + 65_536);
    }
  }
  return upload(chunks());
}

async function refusal(p: Promise<unknown>): Promise<StatusError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof StatusError) return err;
    throw err;
  }
  throw new Error("the push was not refused");
}

/** Every file under the store, but the empty incoming folder. */
function files(root: string): string[] {
  return readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(root.length + 1))
    .sort();
}

describe("ReleaseStore", () => {
  test("push() stores <version>/<arch>.gz and .sig; the gzip inflates to the bytes pushed", async () => {
    const store = new ReleaseStore(join(dir, "releases"));
    const bytes = executable(1_000_000);
    const manifest = manifestOf(bytes);
    const out = await store.push("0.2.0", "amd64", manifest, body(bytes));
    expect(out.stored).toBe(true);
    expect(files(store.root)).toEqual(["0.2.0/amd64.gz", "0.2.0/amd64.sig"]);
    const gz = readFileSync(join(store.root, "0.2.0/amd64.gz"));
    expect(Buffer.compare(gunzipSync(gz), Buffer.from(bytes))).toBe(0);
    expect(readFileSync(join(store.root, "0.2.0/amd64.sig"), "utf8")).toBe(manifest);
    expect(out.info.compressedSize).toBe(gz.length);
    expect(gz.length).toBeLessThan(bytes.length / 2);
    const [listed] = await store.list();
    expect(listed).toMatchObject({ version: "0.2.0", arch: "amd64", size: 1_000_000 });
    expect(listed?.pushedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  });

  test("push() of the same bytes again is a success that changes nothing", async () => {
    const store = new ReleaseStore(join(dir, "releases"));
    const bytes = executable(200_000);
    await store.push("0.2.0", "amd64", manifestOf(bytes), body(bytes));
    const before = statSync(join(store.root, "0.2.0/amd64.gz")).mtimeMs;
    const again = await store.push("0.2.0", "amd64", manifestOf(bytes), body(bytes));
    expect(again.stored).toBe(false);
    expect(statSync(join(store.root, "0.2.0/amd64.gz")).mtimeMs).toBe(before);
  });

  test("push() of other bytes under a stored version and arch is a Conflict; other arch is not", async () => {
    const store = new ReleaseStore(join(dir, "releases"));
    const a = executable(200_000, 1);
    const b = executable(200_000, 3);
    await store.push("0.2.0", "amd64", manifestOf(a), body(a));
    const err = await refusal(store.push("0.2.0", "amd64", manifestOf(b), body(b)));
    expect(err.code).toBe(409);
    expect(err.message).toContain("release 0.2.0/amd64 is already stored with other bytes");
    const arm = await store.push("0.2.0", "arm64", manifestOf(b, "0.2.0", "arm64"), body(b));
    expect(arm.stored).toBe(true);
    expect((await store.list()).map((r) => `${r.version}/${r.arch}`)).toEqual([
      "0.2.0/amd64",
      "0.2.0/arm64",
    ]);
  });

  test("push() refuses bytes whose sha256 or size differ from the manifest, storing nothing", async () => {
    const store = new ReleaseStore(join(dir, "releases"));
    const bytes = executable(300_000);
    const changed = bytes.slice();
    changed[1234] = (changed[1234] ?? 0) ^ 1;
    const sha = await refusal(store.push("0.2.0", "amd64", manifestOf(bytes), body(changed)));
    expect(sha.code).toBe(400);
    expect(sha.message).toStartWith("sha256 mismatch: the upload has ");
    const short = await refusal(
      store.push("0.2.0", "amd64", manifestOf(bytes), body(bytes.subarray(0, 1000))),
    );
    expect(short.message).toBe(
      "size mismatch: the upload has 1000 bytes, the manifest says 300000",
    );
    const long = new Uint8Array(400_000);
    long.set(bytes);
    const over = await refusal(store.push("0.2.0", "amd64", manifestOf(bytes), body(long)));
    expect(over.message).toBe(
      "size mismatch: the upload has 400000 bytes, the manifest says 300000",
    );
    expect(files(store.root)).toEqual([]);
    expect(await store.list()).toEqual([]);
  });

  test("push() refuses a release over the limit with 413, by its manifest or its bytes", async () => {
    const store = new ReleaseStore(join(dir, "releases"), 100_000);
    const bytes = executable(150_000);
    const err = await refusal(store.push("0.2.0", "amd64", manifestOf(bytes), body(bytes)));
    expect(err.code).toBe(413);
    expect(err.message).toBe("the release is 150000 bytes, over the hub's limit of 100000 bytes");
    // A manifest that lies about the size: the bytes over the limit are refused.
    const lying = manifestOf(bytes).replace("size: 150000", "size: 90000");
    const cut = await refusal(store.push("0.2.0", "amd64", lying, body(bytes)));
    expect(cut.code).toBe(413);
    expect(files(store.root)).toEqual([]);
  });

  test("push() refuses a malformed manifest and one of another release than the path's", async () => {
    const store = new ReleaseStore(join(dir, "releases"));
    const bytes = executable(1000);
    const bad = await refusal(store.push("0.2.0", "amd64", "fleetlet-release: 1\n", body(bytes)));
    expect(bad.code).toBe(400);
    expect(bad.message).toContain("malformed release manifest");
    const other = await refusal(
      store.push("0.3.0", "amd64", manifestOf(bytes, "0.2.0"), body(bytes)),
    );
    expect(other.message).toBe("the manifest is of release 0.2.0/amd64, pushed as 0.3.0/amd64");
    const arch = await refusal(store.push("0.2.0", "riscv", manifestOf(bytes), body(bytes)));
    expect(arch.message).toBe('unknown arch "riscv": want amd64 or arm64');
  });

  test("a push cut in the middle leaves no release and no temp file; the next push stores it", async () => {
    const store = new ReleaseStore(join(dir, "releases"));
    const bytes = executable(500_000);
    await expect(
      store.push("0.2.0", "amd64", manifestOf(bytes), body(bytes, 200_000)),
    ).rejects.toThrow("connection reset");
    expect(files(store.root)).toEqual([]);
    expect(await store.get("0.2.0", "amd64")).toBeUndefined();
    expect((await store.push("0.2.0", "amd64", manifestOf(bytes), body(bytes))).stored).toBe(true);
  });

  test("a .gz without its .sig (a push cut by a crash) is not a release, and is replaced", async () => {
    const root = join(dir, "releases");
    const store = new ReleaseStore(root);
    const bytes = executable(100_000);
    await store.push("0.2.0", "amd64", manifestOf(bytes), body(bytes));
    rmSync(join(root, "0.2.0/amd64.sig"));
    const reopened = new ReleaseStore(root);
    expect(await reopened.list()).toEqual([]);
    const other = executable(100_000, 5);
    expect((await reopened.push("0.2.0", "amd64", manifestOf(other), body(other))).stored).toBe(
      true,
    );
    const gz = readFileSync(join(root, "0.2.0/amd64.gz"));
    expect(Buffer.compare(gunzipSync(gz), Buffer.from(other))).toBe(0);
  });

  test("a second push of the same release while one is under way is a Conflict", async () => {
    const store = new ReleaseStore(join(dir, "releases"));
    const bytes = executable(200_000);
    let release: () => void = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    async function* slow(): AsyncGenerator<Uint8Array> {
      yield bytes.subarray(0, 1000);
      await held;
      yield bytes.subarray(1000);
    }
    const first = store.push("0.2.0", "amd64", manifestOf(bytes), upload(slow()));
    const err = await refusal(store.push("0.2.0", "amd64", manifestOf(bytes), body(bytes)));
    expect(err.message).toBe("a push of release 0.2.0/amd64 is already under way");
    release();
    expect((await first).stored).toBe(true);
  });

  test("delete() removes one arch or every arch of a version; the folder goes when empty", async () => {
    const store = new ReleaseStore(join(dir, "releases"));
    const bytes = executable(10_000);
    await store.push("0.2.0", "amd64", manifestOf(bytes), body(bytes));
    await store.push("0.2.0", "arm64", manifestOf(bytes, "0.2.0", "arm64"), body(bytes));
    expect(await store.delete("0.2.0", "arm64")).toEqual(["0.2.0/arm64"]);
    expect(files(store.root)).toEqual(["0.2.0/amd64.gz", "0.2.0/amd64.sig"]);
    expect(await store.delete("0.2.0")).toEqual(["0.2.0/amd64"]);
    expect(existsSync(join(store.root, "0.2.0"))).toBe(false);
    expect(await store.delete("0.2.0")).toEqual([]);
  });
});

releaseStoreContract("folder", async () => {
  const root = join(mkdtempSync(join(tmpdir(), "release-contract-")), "releases");
  return {
    open: async () => new ReleaseStore(root),
    remove: async () => rmSync(join(root, ".."), { recursive: true, force: true }),
  };
});
