// Image archives as `docker save` (docker-archive: manifest.json, config JSON, layer tars) and
// OCI image layouts (oci-layout, index.json, blobs/sha256/...) write them, plain or compressed
// with gzip or zstd, read into the images they hold: for each, its names, manifest, config and
// layers with their uncompressed digests (diff IDs). A docker-archive has no manifest blob: one
// is written for it (an OCI manifest), so both formats import the same way.
//
// Invariants:
// - Every blob handed out has the digest and size its descriptor says (checked here).
// - Every error is an ArchiveError saying what is missing or wrong, with the entry's name
//   (values from the archive shortened).
// - Decompressed archives are bounded by `maxBytes` before they are held whole.

import { gunzipSync, zstdDecompressSync } from "node:zlib";
import { parseImageReference } from "../reference.ts";
import { readTar, shown, type TarFiles } from "./tar.ts";

export class ArchiveError extends Error {
  override readonly name = "ArchiveError";
}

export interface Blob {
  mediaType: string;
  digest: string;
  size: number;
  data: Uint8Array;
}

/** One image of an archive. */
export interface ArchiveImage {
  /** Normalized names ("docker.io/library/busybox:1"); empty when the archive names none. */
  names: string[];
  manifest: Blob;
  config: Blob;
  /** In order, base first, each with its diff ID from the config. */
  layers: { blob: Blob; diffId: string }[];
}

export interface Archive {
  format: "docker-archive" | "oci-layout";
  compression: "none" | "gzip" | "zstd";
  images: ArchiveImage[];
}

const MEDIA = {
  ociIndex: "application/vnd.oci.image.index.v1+json",
  dockerList: "application/vnd.docker.distribution.manifest.list.v2+json",
  ociManifest: "application/vnd.oci.image.manifest.v1+json",
  dockerManifest: "application/vnd.docker.distribution.manifest.v2+json",
  ociConfig: "application/vnd.oci.image.config.v1+json",
  layerTar: "application/vnd.oci.image.layer.v1.tar",
  layerGzip: "application/vnd.oci.image.layer.v1.tar+gzip",
  layerZstd: "application/vnd.oci.image.layer.v1.tar+zstd",
} as const;

const isGzip = (b: Uint8Array) => b[0] === 0x1f && b[1] === 0x8b;
const isZstd = (b: Uint8Array) => b[0] === 0x28 && b[1] === 0xb5 && b[2] === 0x2f && b[3] === 0xfd;

export function sha256(data: Uint8Array): string {
  return `sha256:${new Bun.CryptoHasher("sha256").update(data).digest("hex")}`;
}

/** The archive's tar bytes, decompressed when gzip or zstd, at most `maxBytes`. */
function decompress(
  bytes: Uint8Array,
  maxBytes: number,
): { tar: Uint8Array; compression: Archive["compression"] } {
  try {
    if (isGzip(bytes)) {
      return { tar: gunzipSync(bytes, { maxOutputLength: maxBytes }), compression: "gzip" };
    }
    if (isZstd(bytes)) {
      return { tar: zstdDecompressSync(bytes, { maxOutputLength: maxBytes }), compression: "zstd" };
    }
  } catch (err) {
    throw new ArchiveError(`cannot decompress: ${(err as Error).message}`);
  }
  return { tar: bytes, compression: "none" };
}

/** Reads an archive file's bytes into its images. */
export function openArchive(bytes: Uint8Array, maxBytes: number): Archive {
  const { tar, compression } = decompress(bytes, maxBytes);
  let files: TarFiles;
  try {
    files = readTar(tar);
  } catch (err) {
    throw new ArchiveError(`not a readable tar archive: ${(err as Error).message}`);
  }
  let archive: Archive;
  if (files.has("oci-layout") && files.has("index.json")) {
    archive = { format: "oci-layout", compression, images: readOciLayout(files) };
  } else if (files.has("manifest.json")) {
    archive = { format: "docker-archive", compression, images: readDockerArchive(files) };
  } else {
    throw new ArchiveError("neither an OCI layout (oci-layout, index.json) nor a docker-archive");
  }
  if (archive.images.length === 0) throw new ArchiveError(`the ${archive.format} holds no image`);
  return archive;
}

function parseJson(files: TarFiles, name: string): unknown {
  const data = files.get(name);
  if (data === undefined) throw new ArchiveError(`${name} is missing`);
  try {
    return JSON.parse(new TextDecoder().decode(data));
  } catch (err) {
    throw new ArchiveError(`${name} is not JSON: ${(err as Error).message}`);
  }
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** The diff IDs of an image config's rootfs. */
function diffIdsOf(config: Uint8Array, where: string): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder().decode(config));
  } catch {
    throw new ArchiveError(`config ${where} is not JSON`);
  }
  const ids = isObject(parsed) && isObject(parsed.rootfs) ? parsed.rootfs.diff_ids : undefined;
  if (!Array.isArray(ids) || !ids.every((d) => typeof d === "string" && isDigest(d))) {
    throw new ArchiveError(`config ${where} has no rootfs.diff_ids`);
  }
  return ids as string[];
}

const isDigest = (d: string) => /^sha256:[0-9a-f]{64}$/.test(d);

/** An image name from a tag as archives write it; undefined for a bare word (a tag without its
 * repository, which says nothing about the image's name). */
export function imageName(tag: string): string | undefined {
  if (!tag.includes("/") && !tag.includes(":")) return undefined;
  try {
    const ref = parseImageReference(tag);
    return ref.digest === "" ? ref.normalized : undefined;
  } catch {
    return undefined;
  }
}

function layerMediaType(data: Uint8Array): string {
  if (isGzip(data)) return MEDIA.layerGzip;
  if (isZstd(data)) return MEDIA.layerZstd;
  return MEDIA.layerTar;
}

function blobOf(mediaType: string, data: Uint8Array): Blob {
  return { mediaType, digest: sha256(data), size: data.length, data };
}

function readDockerArchive(files: TarFiles): ArchiveImage[] {
  const manifest = parseJson(files, "manifest.json");
  if (!Array.isArray(manifest)) throw new ArchiveError("manifest.json is not a list");
  return manifest.map((entry, i) => {
    const where = `manifest.json entry ${i}`;
    if (!isObject(entry) || typeof entry.Config !== "string" || !Array.isArray(entry.Layers)) {
      throw new ArchiveError(`${where} has no Config and Layers`);
    }
    const configData = files.get(entry.Config);
    if (configData === undefined) throw new ArchiveError(`${shown(entry.Config)} is missing`);
    const config = blobOf(MEDIA.ociConfig, configData);
    const diffIds = diffIdsOf(configData, entry.Config);
    if (diffIds.length !== entry.Layers.length) {
      throw new ArchiveError(
        `${where}: ${entry.Layers.length} layers, config has ${diffIds.length}`,
      );
    }
    const layers = entry.Layers.map((name: unknown, j: number) => {
      const data = typeof name === "string" ? files.get(name) : undefined;
      if (data === undefined) throw new ArchiveError(`layer ${shown(name)} is missing`);
      return { blob: blobOf(layerMediaType(data), data), diffId: diffIds[j] as string };
    });
    const tags = Array.isArray(entry.RepoTags) ? entry.RepoTags : [];
    const names = tags.flatMap((t: unknown) => (typeof t === "string" ? (imageName(t) ?? []) : []));
    return { names, manifest: manifestFor(config, layers), config, layers };
  });
}

/** The OCI manifest of a config and layers. */
function manifestFor(config: Blob, layers: { blob: Blob }[]): Blob {
  const desc = (b: Blob) => ({ mediaType: b.mediaType, digest: b.digest, size: b.size });
  const body = {
    schemaVersion: 2,
    mediaType: MEDIA.ociManifest,
    config: desc(config),
    layers: layers.map((l) => desc(l.blob)),
  };
  return blobOf(MEDIA.ociManifest, new TextEncoder().encode(JSON.stringify(body)));
}

/** The platform of this process as OCI names it. */
function hostArchitecture(): string {
  const arch: Record<string, string> = { x64: "amd64", arm64: "arm64", arm: "arm", ia32: "386" };
  return arch[process.arch] ?? process.arch;
}

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations: Record<string, unknown>;
  platform: Record<string, unknown>;
}

function descriptorOf(v: unknown, where: string): Descriptor {
  if (!isObject(v) || typeof v.digest !== "string" || !isDigest(v.digest)) {
    throw new ArchiveError(`${where}: not a descriptor with a sha256 digest`);
  }
  if (typeof v.size !== "number" || !Number.isSafeInteger(v.size) || v.size < 0) {
    throw new ArchiveError(`${where}: descriptor ${v.digest} has no valid size`);
  }
  return {
    mediaType: typeof v.mediaType === "string" ? v.mediaType : "",
    digest: v.digest,
    size: v.size,
    annotations: isObject(v.annotations) ? v.annotations : {},
    platform: isObject(v.platform) ? v.platform : {},
  };
}

/** The blob a descriptor names, checked against its digest and size. */
function layoutBlob(files: TarFiles, d: Descriptor): Blob {
  const name = `blobs/sha256/${d.digest.slice("sha256:".length)}`;
  const data = files.get(name);
  if (data === undefined) throw new ArchiveError(`${name} is missing`);
  if (data.length !== d.size) {
    throw new ArchiveError(`${name}: ${data.length} bytes, its descriptor says ${d.size}`);
  }
  if (sha256(data) !== d.digest) throw new ArchiveError(`${name} does not match its digest`);
  return { mediaType: d.mediaType, digest: d.digest, size: d.size, data };
}

const isIndex = (t: string) => t === MEDIA.ociIndex || t === MEDIA.dockerList;

/** The manifest descriptor for this platform in an index (the one manifest if it has one). */
function pickManifest(files: TarFiles, index: Descriptor, depth: number): Descriptor {
  if (depth > 4) throw new ArchiveError(`index ${index.digest} nests too deep`);
  const blob = layoutBlob(files, index);
  const parsed = parseBlobJson(blob);
  const list = isObject(parsed) && Array.isArray(parsed.manifests) ? parsed.manifests : [];
  const ds = list.map((m, i) => descriptorOf(m, `index ${index.digest} entry ${i}`));
  const arch = hostArchitecture();
  const fit =
    ds.find((d) => d.platform.os === "linux" && d.platform.architecture === arch) ??
    (ds.length === 1 ? ds[0] : undefined);
  if (fit === undefined) throw new ArchiveError(`index ${index.digest} has no linux/${arch} image`);
  return isIndex(fit.mediaType) ? pickManifest(files, fit, depth + 1) : fit;
}

function parseBlobJson(blob: Blob): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(blob.data));
  } catch {
    throw new ArchiveError(`blob ${blob.digest} is not JSON`);
  }
}

/** The image one manifest descriptor of an OCI layout names. */
function layoutImage(files: TarFiles, d: Descriptor, names: string[]): ArchiveImage {
  const manifest = layoutBlob(files, d);
  const parsed = parseBlobJson(manifest);
  if (!isObject(parsed) || !Array.isArray(parsed.layers)) {
    throw new ArchiveError(`manifest ${d.digest} has no layers`);
  }
  const config = layoutBlob(files, descriptorOf(parsed.config, `manifest ${d.digest} config`));
  const diffIds = diffIdsOf(config.data, config.digest);
  if (diffIds.length !== parsed.layers.length) {
    const n = parsed.layers.length;
    throw new ArchiveError(`manifest ${d.digest}: ${n} layers, config has ${diffIds.length}`);
  }
  const layers = parsed.layers.map((l, i) => ({
    blob: layoutBlob(files, descriptorOf(l, `manifest ${d.digest} layer ${i}`)),
    diffId: diffIds[i] as string,
  }));
  return { names, manifest, config, layers };
}

/** The images of an OCI layout: one per entry of index.json (an index entry picks this
 * platform's manifest), named by its io.containerd.image.name or a full reference in
 * org.opencontainers.image.ref.name. */
function readOciLayout(files: TarFiles): ArchiveImage[] {
  const index = parseJson(files, "index.json");
  if (!isObject(index) || !Array.isArray(index.manifests)) {
    throw new ArchiveError("index.json has no manifests");
  }
  return index.manifests.map((m, i) => {
    const d = descriptorOf(m, `index.json entry ${i}`);
    const named = [
      d.annotations["io.containerd.image.name"],
      d.annotations["org.opencontainers.image.ref.name"],
    ].flatMap((n) => (typeof n === "string" ? (imageName(n) ?? []) : []));
    const target = isIndex(d.mediaType) ? pickManifest(files, d, 0) : d;
    return layoutImage(files, target, [...new Set(named)].slice(0, 1));
  });
}
