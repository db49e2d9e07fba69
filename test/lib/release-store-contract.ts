// The contract every implementation of the hub's agent releases (src/hub/releases/store.ts
// `Releases`) keeps, as one suite run against each: a pushed release is listed and read back
// (whole and by ranges) as the gzip of the bytes pushed, also by a store opened again on the same
// place (another replica); the same bytes again change nothing, other bytes are a Conflict, bytes
// that differ from their manifest store nothing, a delete removes.
import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { gunzipSync } from "node:zlib";
import { StatusError } from "../../src/api/status.ts";
import type { Releases, StoredRelease } from "../../src/hub/releases/store.ts";
import { type Arch, serializeManifest } from "../../src/release/manifest.ts";
import { type Backing, onBacking } from "./store-backing.ts";

/** Bytes that do not compress, `n` long (a gzip about as large: several chunks). */
export function randomExecutable(n: number, seed = 1): Uint8Array {
  const b = new Uint8Array(n);
  let x = Math.imul(seed, 2654435761) >>> 0;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    b[i] = x >>> 24;
  }
  return b;
}

export function manifestOf(bytes: Uint8Array, version = "0.2.0", arch: Arch = "amd64"): string {
  const sha256 = createHash("sha256").update(bytes).digest("hex");
  return serializeManifest({
    version,
    arch,
    size: bytes.length,
    sha256,
    signature: new Uint8Array(64),
  });
}

/** The stored gzip bytes [start, end] of `r`, read through the store. */
export async function readBack(
  store: Releases,
  r: StoredRelease,
  start = 0,
  end = r.compressedSize - 1,
): Promise<Buffer> {
  return Buffer.from(await new Response(store.read(r, start, end)).arrayBuffer());
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

export function releaseStoreContract(name: string, backing: () => Promise<Backing<Releases>>) {
  const run = (fn: (open: () => Promise<Releases>) => Promise<void>) => onBacking(backing, fn);

  describe(`the release store contract: ${name}`, () => {
    test(
      "a pushed release is listed and read back, whole and by ranges, by another store on the same place",
      run(async (open) => {
        const a = await open();
        const bytes = randomExecutable(2_500_000);
        const out = await a.push("0.2.0", "amd64", manifestOf(bytes), new Response(bytes));
        expect(out.stored).toBe(true);
        const b = await open();
        expect(await b.list()).toEqual([out.info]);
        const r = await b.get("0.2.0", "amd64");
        if (r === undefined) throw new Error("not stored");
        expect(r.manifest).toBe(manifestOf(bytes));
        const gz = await readBack(b, r);
        expect(gz.length).toBe(r.compressedSize);
        expect(Buffer.compare(gunzipSync(gz), Buffer.from(bytes))).toBe(0);
        for (const [s, e] of [
          [0, 9],
          [1_048_570, 1_048_590],
          [1_000_000, r.compressedSize - 1],
          [r.compressedSize - 1, r.compressedSize - 1],
        ] as const)
          expect(Buffer.compare(await readBack(b, r, s, e), gz.subarray(s, e + 1))).toBe(0);
        expect(await b.get("0.2.0", "arm64")).toBeUndefined();
        expect(await b.get("not a version", "amd64")).toBeUndefined();
      }),
    );

    test(
      "the same bytes again change nothing; other bytes are a Conflict; another arch is not",
      run(async (open) => {
        const s = await open();
        const x = randomExecutable(100_000, 1);
        const y = randomExecutable(100_000, 2);
        const first = await s.push("0.2.0", "amd64", manifestOf(x), new Response(x));
        const again = await (await open()).push("0.2.0", "amd64", manifestOf(x), new Response(x));
        expect(again).toEqual({ stored: false, info: first.info });
        const err = await refusal(s.push("0.2.0", "amd64", manifestOf(y), new Response(y)));
        expect(err.code).toBe(409);
        const arm = manifestOf(y, "0.2.0", "arm64");
        expect((await s.push("0.2.0", "arm64", arm, new Response(y))).stored).toBe(true);
        expect((await s.list()).map((r) => `${r.version}/${r.arch}`)).toEqual([
          "0.2.0/amd64",
          "0.2.0/arm64",
        ]);
      }),
    );

    test(
      "bytes whose sha256 differs from the manifest store nothing; a delete removes",
      run(async (open) => {
        const s = await open();
        const x = randomExecutable(100_000, 1);
        const changed = x.slice();
        changed[77] = (changed[77] ?? 0) ^ 1;
        const err = await refusal(s.push("0.2.0", "amd64", manifestOf(x), new Response(changed)));
        expect(err.message).toStartWith("sha256 mismatch");
        expect(await s.list()).toEqual([]);
        await s.push("0.2.0", "amd64", manifestOf(x), new Response(x));
        await s.push("0.2.0", "arm64", manifestOf(x, "0.2.0", "arm64"), new Response(x));
        expect(await s.delete("0.2.0", "arm64")).toEqual(["0.2.0/arm64"]);
        expect(await (await open()).delete("0.2.0")).toEqual(["0.2.0/amd64"]);
        expect(await s.list()).toEqual([]);
        expect(await s.get("0.2.0", "amd64")).toBeUndefined();
      }),
    );
  });
}
