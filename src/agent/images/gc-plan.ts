// The image GC's decisions (kubelet's image GC manager), from the images the runtime lists, the
// containers using them, the records of their use and the time; no I/O here:
// - detectImages(): updates the records after one look at the runtime (first seen, last used);
// - evictionOrder(): the images that may go, least recently used first;
// - tooOld() (imageMaximumGCAge) and bytesToFree() (the high and low thresholds).
import type { Image } from "../../cri/index.ts";
import { parseImageReference } from "./reference.ts";

export interface ImageGCPolicy {
  /** Usage (%) of the image filesystem at or above which images are removed. */
  highThresholdPercent: number;
  /** Usage (%) the removals aim for. */
  lowThresholdPercent: number;
  /** An image first seen less than this long ago is never removed (ms). */
  minAgeMs: number;
  /** An unused image unused for longer than this is removed whatever the disk (ms; 0 = off). */
  maxAgeMs: number;
}

/** When an image was first seen and last seen in use (epoch ms; lastUsed 0: never). */
export interface ImageUse {
  firstDetected: number;
  lastUsed: number;
}

/** One image as the GC sees it in a pass. */
export interface TrackedImage extends ImageUse {
  id: string;
  /** Bytes, as the runtime reports them. */
  size: number;
  /** A container (running or not) uses it. */
  inUse: boolean;
  /** Pinned by the runtime, or the runtime's sandbox image: never removed. */
  pinned: boolean;
}

/** Normalized name of a reference, or the text itself when it does not parse. */
export function normalizeName(ref: string): string {
  try {
    return parseImageReference(ref).normalized;
  } catch {
    return ref;
  }
}

/**
 * The images of `images`, tracked: one new to `records` counts as first seen `now`; one that a
 * container uses (by id, digest or name in `used`) was last used `now`; `pinnedNames` (the
 * sandbox image) pin the images they name. `records` is updated to exactly the listed images.
 */
export function detectImages(
  images: readonly Image[],
  used: ReadonlySet<string>,
  pinnedNames: ReadonlySet<string>,
  records: Map<string, ImageUse>,
  now: number,
): TrackedImage[] {
  const listed = new Set<string>();
  const out: TrackedImage[] = [];
  for (const image of images) {
    listed.add(image.id);
    const names = [...image.repoTags, ...image.repoDigests];
    const inUse = used.has(image.id) || names.some((n) => used.has(n));
    const record = records.get(image.id) ?? { firstDetected: now, lastUsed: 0 };
    if (inUse) record.lastUsed = now;
    records.set(image.id, record);
    const pinned = image.pinned || image.repoTags.some((t) => pinnedNames.has(normalizeName(t)));
    out.push({ id: image.id, size: image.size, inUse, pinned, ...record });
  }
  for (const id of records.keys()) if (!listed.has(id)) records.delete(id);
  return out;
}

/** The images that may be removed (not in use, not pinned), least recently used first, then
 * first seen first. */
export function evictionOrder(images: readonly TrackedImage[]): TrackedImage[] {
  return images
    .filter((i) => !i.inUse && !i.pinned)
    .sort((a, b) => a.lastUsed - b.lastUsed || a.firstDetected - b.firstDetected);
}

/** Whether an unused image has gone unused for longer than maxAgeMs (from its last use, or from
 * when it was first seen if never used). Always false when maxAgeMs is 0. */
export function tooOld(image: ImageUse, now: number, maxAgeMs: number): boolean {
  return maxAgeMs > 0 && now - Math.max(image.lastUsed, image.firstDetected) > maxAgeMs;
}

/** Whether the minimum age keeps the image (first seen less than minAgeMs ago). */
export function tooYoung(image: ImageUse, now: number, minAgeMs: number): boolean {
  return now - image.firstDetected < minAgeMs;
}

/** Usage in whole percent as the kubelet computes it: 100 - available * 100 / capacity. */
export function usagePercent(capacity: number, available: number): number {
  return 100 - Math.floor((Math.min(available, capacity) * 100) / capacity);
}

/** Bytes to free to bring usage down to the low threshold, when usage is at or above the high
 * one; undefined below it. `capacity` must be above 0. */
export function bytesToFree(
  capacity: number,
  available: number,
  policy: Pick<ImageGCPolicy, "highThresholdPercent" | "lowThresholdPercent">,
): number | undefined {
  const avail = Math.min(available, capacity);
  if (usagePercent(capacity, avail) < policy.highThresholdPercent) return undefined;
  return Math.floor((capacity * (100 - policy.lowThresholdPercent)) / 100) - avail;
}
