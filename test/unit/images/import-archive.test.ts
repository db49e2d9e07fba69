import { describe, expect, test } from "bun:test";
import { ArchiveError, imageName, openArchive } from "../../../src/agent/images/import/archive.ts";
import { chainIds, planImport } from "../../../src/agent/images/import/plan.ts";
import {
  addLayer,
  compress,
  dockerArchive,
  ociArchive,
  sha256,
  type TestImage,
  writeTar,
} from "../../lib/image-archives.ts";

const enc = new TextEncoder();
const MAX = 1 << 26;

function blob(mediaType: string, data: Uint8Array) {
  return { mediaType, digest: sha256(data), size: data.length, data };
}

/** A one-layer image (the layer a plain tar with one file). */
function baseImage(): TestImage {
  const layerTar = writeTar([{ name: "bin/sh", data: enc.encode("#!") }]);
  const config = blob(
    "application/vnd.oci.image.config.v1+json",
    enc.encode(JSON.stringify({ rootfs: { type: "layers", diff_ids: [sha256(layerTar)] } })),
  );
  const layer = blob("application/vnd.oci.image.layer.v1.tar", layerTar);
  const manifest = blob(
    "application/vnd.oci.image.manifest.v1+json",
    enc.encode(JSON.stringify({ schemaVersion: 2, config, layers: [layer] })),
  );
  return { config, layers: [layer], manifest };
}

const twoLayers = () => addLayer(baseImage(), "marker", "hello", "gzip");

describe("openArchive()", () => {
  test.each(["none", "gzip", "zstd"] as const)("reads a %s OCI layout with its name", (how) => {
    const image = twoLayers();
    const archive = openArchive(compress(ociArchive(image, "example.org/a/b:v1"), how), MAX);
    expect(archive.format).toBe("oci-layout");
    expect(archive.compression).toBe(how);
    const [read] = archive.images;
    expect(read?.names).toEqual(["example.org/a/b:v1"]);
    expect(read?.manifest.digest).toBe(image.manifest.digest);
    expect(read?.layers.map((l) => l.blob.mediaType)).toEqual([
      "application/vnd.oci.image.layer.v1.tar",
      "application/vnd.oci.image.layer.v1.tar+gzip",
    ]);
  });

  test("reads a docker-archive, writing an OCI manifest for it and normalizing its tag", () => {
    const image = twoLayers();
    const archive = openArchive(dockerArchive(image, "busybox:1"), MAX);
    expect(archive.format).toBe("docker-archive");
    const [read] = archive.images;
    expect(read?.names).toEqual(["docker.io/library/busybox:1"]);
    const manifest = JSON.parse(new TextDecoder().decode(read?.manifest.data));
    expect(manifest.config.digest).toBe(image.config.digest);
    expect(manifest.layers.map((l: { digest: string }) => l.digest)).toEqual(
      image.layers.map((l) => l.digest),
    );
    expect(read?.manifest.digest).toBe(sha256(read?.manifest.data as Uint8Array));
  });

  const broken: [string, () => Uint8Array, string][] = [
    ["a blob missing", () => ociArchive({ ...twoLayers(), layers: [] }, "a/b:1"), "is missing"],
    [
      "a blob whose bytes do not match its digest",
      () => {
        const image = twoLayers();
        const bad = { ...(image.layers[1] as TestImage["layers"][0]), data: enc.encode("xx") };
        return ociArchive({ ...image, layers: [image.layers[0] as typeof bad, bad] }, "a/b:1");
      },
      "bytes, its descriptor says",
    ],
    ["neither format", () => writeTar([{ name: "hello" }]), "neither an OCI layout"],
    [
      "a docker-archive of no image",
      () => writeTar([{ name: "manifest.json", data: enc.encode("[]") }]),
      "holds no image",
    ],
    [
      "a missing layer named by a long value, shortened",
      () =>
        writeTar([
          {
            name: "manifest.json",
            data: enc.encode(JSON.stringify([{ Config: "c", Layers: ["x".repeat(5000)] }])),
          },
          {
            name: "c",
            data: enc.encode(
              JSON.stringify({ rootfs: { diff_ids: [`sha256:${"a".repeat(64)}`] } }),
            ),
          },
        ]),
      `layer "${"x".repeat(100)}…" is missing`,
    ],
    [
      "a cut gzip stream",
      () => compress(ociArchive(twoLayers(), "a/b:1"), "gzip").subarray(0, 200),
      "cannot decompress",
    ],
    [
      "a docker-archive with fewer layers than diff IDs",
      () => {
        const image = twoLayers();
        return dockerArchive(
          { ...image, layers: [image.layers[0] as TestImage["layers"][0]] },
          "a:1",
        );
      },
      "1 layers, config has 2",
    ],
  ];
  test.each(broken)("refuses %s with an ArchiveError", (_, make, message) => {
    expect(() => openArchive(make(), MAX)).toThrow(ArchiveError);
    expect(() => openArchive(make(), MAX)).toThrow(message);
  });

  test.each(["gzip", "zstd"] as const)(
    "refuses a %s archive that decompresses past the limit",
    (how) => {
      const big = compress(new Uint8Array(1 << 20), how);
      expect(() => openArchive(big, 1 << 16)).toThrow("cannot decompress");
    },
  );
});

describe("imageName()", () => {
  const cases: [string, string | undefined][] = [
    ["busybox:1", "docker.io/library/busybox:1"],
    ["example.org/a/b:v1", "example.org/a/b:v1"],
    ["127.0.0.1:5000/x", "127.0.0.1:5000/x:latest"],
    ["v1", undefined],
    ["Not A Name/x", undefined],
  ];
  test.each(cases)("%p names %p", (tag, name) => {
    expect(imageName(tag)).toBe(name);
  });
});

describe("planImport()", () => {
  test("stores blobs with GC labels, unpacks each layer on its parent chain, then names the image", () => {
    const image = twoLayers();
    const [read] = openArchive(ociArchive(image, "example.org/a/b:v1"), MAX).images;
    const steps = planImport([read as NonNullable<typeof read>], "overlayfs");
    expect(steps.map((s) => s.kind)).toEqual([
      "blob",
      "blob",
      "blob",
      "blob",
      "unpack",
      "unpack",
      "image",
    ]);
    const diffIds = JSON.parse(new TextDecoder().decode(image.config.data)).rootfs.diff_ids;
    const chains = chainIds(diffIds);
    const byDigest = new Map<string, Record<string, unknown>>(
      steps.flatMap((s) => (s.kind === "blob" ? [[s.blob.digest, s.labels] as const] : [])),
    );
    expect(byDigest.get(image.manifest.digest)).toEqual({
      "containerd.io/gc.ref.content.config": image.config.digest,
      "containerd.io/gc.ref.content.l.0": image.layers[0]?.digest,
      "containerd.io/gc.ref.content.l.1": image.layers[1]?.digest,
    });
    expect(byDigest.get(image.config.digest)).toEqual({
      "containerd.io/gc.ref.snapshot.overlayfs": chains[1],
    });
    expect(byDigest.get(image.layers[1]?.digest as string)).toEqual({
      "containerd.io/uncompressed": diffIds[1],
    });
    const unpacks = steps.filter((s) => s.kind === "unpack");
    expect(unpacks.map((u) => [u.parent, u.chainId] as unknown[])).toEqual([
      ["", chains[0]],
      [chains[0], chains[1]],
    ]);
  });

  test("chainIds() chains each diff ID on its parent's chain ID", () => {
    const [a, b] = [`sha256:${"a".repeat(64)}`, `sha256:${"b".repeat(64)}`];
    expect(chainIds([a, b])).toEqual([a, sha256(enc.encode(`${a} ${b}`))]);
  });

  test("stores a blob and unpacks a chain once when two images share them", () => {
    const image = twoLayers();
    const [read] = openArchive(ociArchive(image, "a/b:1"), MAX).images;
    const one = read as NonNullable<typeof read>;
    const steps = planImport([one, { ...one, names: ["a/c:1"] }], "overlayfs");
    expect(steps.filter((s) => s.kind === "blob")).toHaveLength(4);
    expect(steps.filter((s) => s.kind === "unpack")).toHaveLength(2);
    expect(steps.filter((s) => s.kind === "image")).toHaveLength(2);
  });

  test("refuses an image the archive does not name", () => {
    const [read] = openArchive(ociArchive(twoLayers(), "v1"), MAX).images;
    expect(read?.names).toEqual([]);
    expect(() => planImport([read as NonNullable<typeof read>], "overlayfs")).toThrow(
      "has no name",
    );
  });
});
