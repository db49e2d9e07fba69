// Node.status.images as the kubelet reports them: the largest images first, at most
// nodeStatusMaxImages of them (-1: all), each with up to 5 names (digests, then tags).
import type { ContainerImage } from "../../api/node.ts";
import type { Image } from "../../cri/index.ts";

/** The kubelet's MaxNamesPerImageInNodeStatus. */
const MAX_NAMES_PER_IMAGE = 5;

export function imageListForStatus(images: readonly Image[], max: number): ContainerImage[] {
  const sorted = [...images].sort((a, b) => b.size - a.size || a.id.localeCompare(b.id));
  const kept = max >= 0 ? sorted.slice(0, max) : sorted;
  return kept.map((i) => ({
    names: [...i.repoDigests, ...i.repoTags].slice(0, MAX_NAMES_PER_IMAGE),
    sizeBytes: i.size,
  }));
}
