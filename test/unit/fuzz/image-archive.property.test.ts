// Properties of the image import's readers (src/agent/images/import): the tar reader and the
// archive readers (docker-archive's manifest.json and config, an OCI layout's index.json,
// manifests and configs). For any input each gives its result or its documented error (TarError,
// ArchiveError), never another exception; a tar cut anywhere never yields a short entry; a size
// field past the end is refused before anything is read; names never leave the archive; every
// blob handed out matches its digest and size; and the planner takes what the reader gives.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { ArchiveError, openArchive } from "../../../src/agent/images/import/archive.ts";
import { planImport } from "../../../src/agent/images/import/plan.ts";
import { readTar, TarError } from "../../../src/agent/images/import/tar.ts";
import { fuzz, fuzzTimeout } from "../../lib/fuzz.ts";
import { compress, sha256, type TarEntry, writeTar } from "../../lib/image-archives.ts";
import { type Json, nearValidText } from "./json-mutations.ts";

const TIMEOUT = fuzzTimeout(60_000);
const enc = new TextEncoder();
const MAX = 1 << 24;
/** Error messages show values from the archive shortened: they go into node events. */
const MESSAGE_MAX = 400;

/** Path segments, with the ones a hostile archive uses. */
const segment = fc.oneof(
  { weight: 6, arbitrary: fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,8}$/) },
  fc.constantFrom("..", ".", "", "sha256"),
);
const entryName = fc
  .tuple(fc.constantFrom("", "/", "./"), fc.array(segment, { minLength: 1, maxLength: 4 }))
  .map(([lead, parts]) => `${lead}${parts.join("/")}`.slice(0, 99));
const entry: fc.Arbitrary<TarEntry> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({ name: entryName, data: fc.uint8Array({ maxLength: 1500 }) }),
  },
  fc.record({ name: entryName, link: entryName }),
);

/** The names readTar promises: relative, no "." or ".." part, no empty part. */
function clean(name: string): boolean {
  return !name.startsWith("/") && name.split("/").every((p) => p !== "" && p !== "." && p !== "..");
}

/** readTar's result for `bytes`, or its TarError; any other exception fails the property. */
function tarOrError(bytes: Uint8Array): ReadonlyMap<string, Uint8Array> | TarError {
  try {
    return readTar(bytes);
  } catch (err) {
    if (err instanceof TarError) return err;
    throw err;
  }
}

/** A size field past any archive made here (at least 1 MiB): octal up to 11 digits, or
 * base-256 up to 2^63. */
const hugeSize = fc.oneof(
  fc.bigInt({ min: 1n << 20n, max: 0o77777777777n }).map((n) => ({ octal: n.toString(8) })),
  fc.bigInt({ min: 1n << 33n, max: (1n << 63n) - 1n }).map((n) => ({ base256: n })),
);

function setSize(tar: Uint8Array, size: { octal?: string; base256?: bigint }): Uint8Array {
  const out = tar.slice();
  out.fill(0, 124, 136);
  if (size.octal !== undefined) out.set(enc.encode(size.octal.padStart(11, "0")), 124);
  else {
    let n = size.base256 as bigint;
    for (let i = 135; i > 124; i--) {
      out[i] = Number(n & 0xffn);
      n >>= 8n;
    }
    out[124] = 0x80;
  }
  out.fill(32, 148, 156);
  const sum = out.subarray(0, 512).reduce((a, b) => a + b, 0);
  out.set(enc.encode(`${sum.toString(8).padStart(6, "0")}\0 `), 148);
  return out;
}

describe("readTar() properties", () => {
  test(
    "any bytes give files with clean names, bounded by the input, or a TarError",
    async () => {
      await fuzz(
        "tar-random-bytes",
        fc.oneof(
          fc.uint8Array({ maxLength: 3000 }),
          fc.array(entry, { maxLength: 5 }).map((es) => writeTar(es)),
        ),
        (bytes) => {
          const r = tarOrError(bytes);
          if (r instanceof TarError) {
            expect(r.message.length).toBeLessThan(MESSAGE_MAX);
            return;
          }
          for (const [name, data] of r) {
            expect(clean(name)).toBe(true);
            expect(data.length).toBeLessThanOrEqual(bytes.length);
          }
        },
        { seed: 31_301, runs: 300 },
      );
    },
    TIMEOUT,
  );

  test(
    "a valid archive cut anywhere gives a TarError or whole entries only",
    async () => {
      const files = fc.uniqueArray(
        fc.record({
          name: fc.stringMatching(/^[a-z]{1,8}(\/[a-z]{1,8}){0,2}$/),
          data: fc.uint8Array({ maxLength: 1500 }),
        }),
        { selector: (e) => e.name, minLength: 1, maxLength: 4 },
      );
      await fuzz(
        "tar-truncated",
        files.chain((es) => fc.tuple(fc.constant(es), fc.nat({ max: writeTar(es).length }))),
        ([es, cut]) => {
          const whole = writeTar(es);
          const want = new Map(es.map((e) => [e.name, e.data]));
          const r = tarOrError(whole.subarray(0, cut));
          if (cut === whole.length) expect(r).toEqual(want);
          if (r instanceof TarError) return;
          for (const [name, data] of r) expect(data).toEqual(want.get(name) as Uint8Array);
        },
        { seed: 31_302, runs: 300 },
      );
    },
    TIMEOUT,
  );

  test(
    "a size field past the end is refused with a TarError",
    async () => {
      await fuzz(
        "tar-huge-size",
        fc.tuple(fc.uint8Array({ maxLength: 600 }), hugeSize),
        ([data, size]) => {
          const tar = setSize(writeTar([{ name: "layer.tar", data }]), size);
          expect(() => readTar(tar)).toThrow(TarError);
        },
        { seed: 31_303, runs: 200 },
      );
    },
    TIMEOUT,
  );
});

const LAYER = writeTar([{ name: "bin/sh", data: enc.encode("#!") }]);
const CONFIG: Json = {
  architecture: "amd64",
  os: "linux",
  rootfs: { type: "layers", diff_ids: [sha256(LAYER)] },
};
const desc = (mediaType: string, data: Uint8Array) => ({
  mediaType,
  digest: sha256(data),
  size: data.length,
});

/** An OCI layout whose config, manifest and index are the given texts (mutated or not), each
 * blob under its own digest, so that mutations reach past the digest checks. */
function ociLayout(configText: string, manifestText: string, indexText: string): Uint8Array {
  const blob = (d: Uint8Array) => ({ name: `blobs/sha256/${sha256(d).slice(7)}`, data: d });
  return writeTar([
    { name: "oci-layout", data: enc.encode('{"imageLayoutVersion":"1.0.0"}') },
    { name: "index.json", data: enc.encode(indexText) },
    blob(enc.encode(configText)),
    blob(enc.encode(manifestText)),
    blob(LAYER),
  ]);
}

function dockerArchiveOf(configText: string, manifestText: string) {
  return writeTar([
    { name: "manifest.json", data: enc.encode(manifestText) },
    { name: "config.json", data: enc.encode(configText) },
    { name: "l/layer.tar", data: LAYER },
  ]);
}

const DOCKER_MANIFEST: Json = [
  { Config: "config.json", RepoTags: ["a/b:1"], Layers: ["l/layer.tar"] },
];

/** A text that is the JSON of `valid`, mutated or not (half of the time as it is). */
const maybeMutated = (valid: Json) =>
  fc.oneof(fc.constant(JSON.stringify(valid)), nearValidText(fc.constant(valid)));

/** An OCI layout with its config, manifest and index each mutated or not, every descriptor
 * naming the (mutated) blob below it. */
const ociLayouts = maybeMutated(CONFIG)
  .chain((config) =>
    maybeMutated({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: desc("application/vnd.oci.image.config.v1+json", enc.encode(config)),
      layers: [desc("application/vnd.oci.image.layer.v1.tar", LAYER)],
    }).map((manifest) => [config, manifest] as const),
  )
  .chain(([config, manifest]) =>
    maybeMutated({
      schemaVersion: 2,
      manifests: [
        {
          ...desc("application/vnd.oci.image.manifest.v1+json", enc.encode(manifest)),
          annotations: { "io.containerd.image.name": "example.org/a/b:1" },
        },
      ],
    }).map((index) => ociLayout(config, manifest, index)),
  );

const archives = fc.oneof(
  ociLayouts,
  fc
    .tuple(maybeMutated(CONFIG), maybeMutated(DOCKER_MANIFEST))
    .map(([config, manifest]) => dockerArchiveOf(config, manifest)),
);

describe("openArchive() properties", () => {
  test(
    "near-valid archives give images whose blobs match their digests, or an ArchiveError",
    async () => {
      await fuzz(
        "image-archive-near-valid",
        fc.tuple(
          archives,
          fc.constantFrom("none", "gzip", "zstd") as fc.Arbitrary<"none" | "gzip" | "zstd">,
        ),
        ([tar, how]) => {
          let archive: ReturnType<typeof openArchive>;
          try {
            archive = openArchive(compress(tar, how), MAX);
          } catch (err) {
            if (!(err instanceof ArchiveError)) throw err;
            expect(err.message.length).toBeLessThan(MESSAGE_MAX);
            return;
          }
          for (const image of archive.images) {
            const blobs = [image.manifest, image.config, ...image.layers.map((l) => l.blob)];
            for (const b of blobs) {
              expect(b.digest).toBe(sha256(b.data));
              expect(b.size).toBe(b.data.length);
            }
            expect(image.layers.every((l) => /^sha256:[0-9a-f]{64}$/.test(l.diffId))).toBe(true);
          }
          try {
            const steps = planImport(archive.images, "overlayfs");
            expect(steps.filter((s) => s.kind === "image").length).toBeGreaterThan(0);
          } catch (err) {
            if (!(err instanceof ArchiveError)) throw err;
          }
        },
        { seed: 31_304, runs: 150 },
      );
    },
    TIMEOUT,
  );

  test(
    "any bytes, compressed or not, give an archive or an ArchiveError",
    async () => {
      await fuzz(
        "image-archive-random",
        fc.oneof(
          fc.uint8Array({ maxLength: 2000 }),
          archives.chain((t) => fc.nat({ max: t.length }).map((n) => t.subarray(0, n))),
          archives
            .map((t) => compress(t, "gzip"))
            .chain((t) => fc.nat({ max: t.length }).map((n) => t.subarray(0, n))),
          archives
            .map((t) => compress(t, "zstd"))
            .chain((t) => fc.nat({ max: t.length }).map((n) => t.subarray(0, n))),
        ),
        (bytes) => {
          try {
            openArchive(bytes, MAX);
          } catch (err) {
            if (!(err instanceof ArchiveError)) throw err;
            expect(err.message.length).toBeLessThan(MESSAGE_MAX);
          }
        },
        { seed: 31_305, runs: 200 },
      );
    },
    TIMEOUT,
  );
});
