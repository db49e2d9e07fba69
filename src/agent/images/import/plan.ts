// What importing one archive's images into containerd takes, as steps: store every blob with
// the labels containerd's garbage collector follows (manifest → config and layers, config →
// the unpacked snapshot, layer → its uncompressed digest), unpack each layer into a snapshot
// named by its chain ID on its parent's, and name the manifest with an image record, which the
// CRI plugin lists from then on. The steps run under one lease (execute.ts), so that nothing
// is collected while they run and nothing stays when they fail.
//
// Invariants:
// - Steps come in dependency order: blobs before the unpacks that read them, the unpack of a
//   layer after its parent's, the image records last.
// - A blob is stored once even when several images of the archive share it.

import { ArchiveError, type ArchiveImage, type Blob, sha256 } from "./archive.ts";

export type ImportStep =
  | { kind: "blob"; blob: Blob; labels: Record<string, string> }
  | { kind: "unpack"; layer: Blob; diffId: string; chainId: string; parent: string }
  | { kind: "image"; name: string; target: { mediaType: string; digest: string; size: number } };

/** The chain IDs of layers with these diff IDs: the first is its diff ID, each next one the
 * digest of "<parent chain ID> <diff ID>". */
export function chainIds(diffIds: readonly string[]): string[] {
  const out: string[] = [];
  for (const d of diffIds) {
    const parent = out.at(-1);
    out.push(parent === undefined ? d : sha256(new TextEncoder().encode(`${parent} ${d}`)));
  }
  return out;
}

/** The GC labels of a manifest: its config and each layer. */
function manifestLabels(image: ArchiveImage): Record<string, string> {
  const labels: Record<string, string> = {
    "containerd.io/gc.ref.content.config": image.config.digest,
  };
  image.layers.forEach((l, i) => {
    labels[`containerd.io/gc.ref.content.l.${i}`] = l.blob.digest;
  });
  return labels;
}

/** The steps that import `images` with layers unpacked into `snapshotter`. Throws an
 * ArchiveError for an image the archive does not name (it could never be used by a pod). */
export function planImport(images: readonly ArchiveImage[], snapshotter: string): ImportStep[] {
  const blobs: ImportStep[] = [];
  const unpacks: ImportStep[] = [];
  const records: ImportStep[] = [];
  const seenBlobs = new Set<string>();
  const seenChains = new Set<string>();
  const addBlob = (blob: Blob, labels: Record<string, string>) => {
    if (seenBlobs.has(blob.digest)) return;
    seenBlobs.add(blob.digest);
    blobs.push({ kind: "blob", blob, labels });
  };
  for (const image of images) {
    if (image.names.length === 0) {
      throw new ArchiveError(
        `image ${image.manifest.digest} has no name (a repository tag, io.containerd.image.name or a full org.opencontainers.image.ref.name)`,
      );
    }
    const chains = chainIds(image.layers.map((l) => l.diffId));
    image.layers.forEach((l, i) => {
      addBlob(l.blob, { "containerd.io/uncompressed": l.diffId });
      const chainId = chains[i] as string;
      if (seenChains.has(chainId)) return;
      seenChains.add(chainId);
      const parent = i === 0 ? "" : (chains[i - 1] as string);
      unpacks.push({ kind: "unpack", layer: l.blob, diffId: l.diffId, chainId, parent });
    });
    const top = chains.at(-1);
    addBlob(
      image.config,
      top === undefined ? {} : { [`containerd.io/gc.ref.snapshot.${snapshotter}`]: top },
    );
    addBlob(image.manifest, manifestLabels(image));
    const { mediaType, digest, size } = image.manifest;
    for (const name of image.names) {
      records.push({ kind: "image", name, target: { mediaType, digest, size } });
    }
  }
  return [...blobs, ...unpacks, ...records];
}
