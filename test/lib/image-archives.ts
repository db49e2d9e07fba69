// Image archives for import tests, built here: a small tar writer (ustar), and images made of a
// base image's blobs fetched from the loopback registry over HTTP plus one layer of our own
// with a marker file, written as an OCI layout or a docker-archive, plain, gzip or zstd.

const enc = new TextEncoder();

export interface TarEntry {
  name: string;
  data?: Uint8Array;
  /** A symbolic link to `link` instead of a file. */
  link?: string;
  /** Size written in the header instead of data's (to make broken archives). */
  sizeField?: string;
}

function header(e: TarEntry, size: number): Uint8Array {
  const h = new Uint8Array(512);
  const put = (text: string, at: number, len: number) =>
    h.set(enc.encode(text).subarray(0, len), at);
  put(e.name, 0, 100);
  put("0000644\0", 100, 8);
  put("0000000\0", 108, 8);
  put("0000000\0", 116, 8);
  put(e.sizeField ?? `${size.toString(8).padStart(11, "0")}\0`, 124, 12);
  put("00000000000\0", 136, 12);
  h[156] = (e.link === undefined ? "0" : "2").charCodeAt(0);
  if (e.link !== undefined) put(e.link, 157, 100);
  put("ustar\0", 257, 6);
  put("00", 263, 2);
  h.fill(32, 148, 156);
  const sum = h.reduce((a, b) => a + b, 0);
  put(`${sum.toString(8).padStart(6, "0")}\0 `, 148, 8);
  return h;
}

/** A tar archive of `entries`, ended by two zero blocks. */
export function writeTar(entries: readonly TarEntry[]): Uint8Array {
  const parts: Uint8Array[] = [];
  for (const e of entries) {
    const data = e.data ?? new Uint8Array();
    parts.push(header(e, data.length), data, new Uint8Array((512 - (data.length % 512)) % 512));
  }
  parts.push(new Uint8Array(1024));
  return Buffer.concat(parts);
}

export const sha256 = (data: Uint8Array) =>
  `sha256:${new Bun.CryptoHasher("sha256").update(data).digest("hex")}`;
const hexOf = (digest: string) => digest.slice("sha256:".length);

interface Blob {
  mediaType: string;
  digest: string;
  size: number;
  data: Uint8Array;
}

const blob = (mediaType: string, data: Uint8Array): Blob => ({
  mediaType,
  digest: sha256(data),
  size: data.length,
  data,
});

/** An image as the archives below write it. */
export interface TestImage {
  config: Blob;
  layers: Blob[];
  manifest: Blob;
}

/** A registry image's config and layers (over plain HTTP from `registry`, "127.0.0.1:PORT"). */
export async function fetchImage(registry: string, repo: string, tag: string): Promise<TestImage> {
  const accept = "application/vnd.oci.image.manifest.v1+json";
  const base = `http://${registry}/v2/${repo}`;
  const res = await fetch(`${base}/manifests/${tag}`, { headers: { accept } });
  const manifest = (await res.json()) as {
    config: { mediaType: string; digest: string };
    layers: { mediaType: string; digest: string }[];
  };
  const get = async (d: { mediaType: string; digest: string }) =>
    blob(
      d.mediaType,
      new Uint8Array(await (await fetch(`${base}/blobs/${d.digest}`)).arrayBuffer()),
    );
  const config = await get(manifest.config);
  const layers = await Promise.all(manifest.layers.map(get));
  return withManifest(config, layers);
}

function withManifest(config: Blob, layers: Blob[]): TestImage {
  const desc = (b: Blob) => ({ mediaType: b.mediaType, digest: b.digest, size: b.size });
  const m = {
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: desc(config),
    layers: layers.map(desc),
  };
  return { config, layers, manifest: blob(m.mediaType, enc.encode(JSON.stringify(m))) };
}

export type Compression = "none" | "gzip" | "zstd";

export function compress(data: Uint8Array, how: Compression): Uint8Array {
  if (how === "gzip") return Bun.gzipSync(data as Uint8Array<ArrayBuffer>);
  if (how === "zstd") return Bun.zstdCompressSync(data as Uint8Array<ArrayBuffer>);
  return data;
}

/** `base` with one more layer holding file `path` (no leading "/") with `content`, its layer
 * compressed `how`; `diffId` overrides the diff ID written in the config (to make a broken one). */
export function addLayer(
  base: TestImage,
  path: string,
  content: string,
  how: Compression,
  diffId?: string,
): TestImage {
  const tar = writeTar([{ name: path, data: enc.encode(content) }]);
  const type = { none: "tar", gzip: "tar+gzip", zstd: "tar+zstd" }[how];
  const layer = blob(`application/vnd.oci.image.layer.v1.${type}`, compress(tar, how));
  const cfg = JSON.parse(new TextDecoder().decode(base.config.data));
  cfg.rootfs.diff_ids = [...cfg.rootfs.diff_ids, diffId ?? sha256(tar)];
  const config = blob(base.config.mediaType, enc.encode(JSON.stringify(cfg)));
  return withManifest(config, [...base.layers, layer]);
}

/** An OCI image layout archive holding `image` named `name`. */
export function ociArchive(image: TestImage, name: string): Uint8Array {
  const { manifest } = image;
  const index = {
    schemaVersion: 2,
    manifests: [
      {
        mediaType: manifest.mediaType,
        digest: manifest.digest,
        size: manifest.size,
        annotations: { "org.opencontainers.image.ref.name": name },
      },
    ],
  };
  const blobs = [manifest, image.config, ...image.layers];
  return writeTar([
    { name: "oci-layout", data: enc.encode('{"imageLayoutVersion":"1.0.0"}') },
    { name: "index.json", data: enc.encode(JSON.stringify(index)) },
    ...blobs.map((b) => ({ name: `blobs/sha256/${hexOf(b.digest)}`, data: b.data })),
  ]);
}

/** A docker-archive (`docker save` layout) holding `image` tagged `repoTag`. */
export function dockerArchive(image: TestImage, repoTag: string): Uint8Array {
  const configName = `${hexOf(image.config.digest)}.json`;
  const layerNames = image.layers.map((l) => `${hexOf(l.digest)}/layer.tar`);
  const manifest = [{ Config: configName, RepoTags: [repoTag], Layers: layerNames }];
  return writeTar([
    { name: "manifest.json", data: enc.encode(JSON.stringify(manifest)) },
    { name: configName, data: image.config.data },
    ...image.layers.map((l, i) => ({ name: layerNames[i] as string, data: l.data })),
  ]);
}
