// The image GC (kubelet's image GC manager). At start and every period: look at the images and
// the containers using them (records of first sight and last use, kept on disk), remove unused
// images unused for longer than imageMaximumGCAge, then, when the image filesystem is at or above
// the high threshold, remove unused images least recently used first (none younger than the
// minimum age) until the low threshold is reached. Every 30 s (and after each pass) the image list
// that Node.status.images shows is refreshed.
//
// Invariants:
// - Never removed: an image a container uses (running or not), a pinned image, the runtime's
//   sandbox image, an image first seen less than imageMinimumGCAge ago (except by max age).
// - run() never throws. A pass that fails, or cannot free enough, is logged; freeing too little
//   is a FreeDiskSpaceFailed node event, and a second failed pass in a row an ImageGCFailed one.
// - Passes never overlap (the eviction manager's deleteUnusedImages waits for a running pass).

import { statfs as fsStatfs } from "node:fs/promises";
import type { ContainerImage } from "../../api/node.ts";
import { type CriRuntime, containerdConfig, type Image } from "../../cri/index.ts";
import { type Clock, sleepQuietly } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { ignoreStateWrites, reportedWrite, type StateWrites } from "../events/state-writes.ts";
import {
  bytesToFree,
  detectImages,
  evictionOrder,
  type ImageGCPolicy,
  type ImageUse,
  normalizeName,
  type TrackedImage,
  tooOld,
  tooYoung,
  usagePercent,
} from "./gc-plan.ts";
import { ImageRecordStore } from "./gc-records.ts";
import { imageListForStatus } from "./node-images.ts";

export interface ImageGCDeps {
  cri: Pick<CriRuntime, "listImages" | "listContainers" | "imageFsInfo" | "removeImage" | "status">;
  clock: Clock;
  logger: Logger;
  policy: ImageGCPolicy;
  /** Time between passes (kubelet: 5 min). */
  periodMs: number;
  /** Time between refreshes of the image list (kubelet: 30 s). */
  listPeriodMs?: number;
  /** Images in Node.status.images (-1: all). */
  maxImagesInStatus: number;
  /** Where first-seen and last-used times are kept (<rootDir>/state/image-gc.json). */
  recordsPath: string;
  /** A Warning event about the node. */
  nodeEvent(reason: string, message: string): void;
  /** Where a failed write of the records is said. */
  stateWrites?: StateWrites;
  /** Names of images never removed besides the runtime's sandbox image (those imported from
   * archives still in the import folder). */
  pinnedImages?: () => Iterable<string>;
  /** Size and free space of the filesystem holding `path`; statfs by default. */
  statfs?: (path: string) => Promise<{ capacity: number; available: number }>;
}

/** What a pass removed. */
export interface ImagesFreed {
  images: number;
  /** The removed images' sizes as the runtime reported them. */
  bytes: number;
}

export interface ImageGC {
  /** One pass: max age, then the thresholds. Throws when it fails or frees too little. */
  garbageCollect(): Promise<ImagesFreed>;
  /** Removes every unused image past the minimum age (the eviction manager's reclaim step);
   * throws when a removal failed, after trying every image. */
  deleteUnusedImages(): Promise<ImagesFreed>;
  /** The images for Node.status.images, largest first; undefined until first listed. */
  imageList(): ContainerImage[] | undefined;
  /** Refreshes imageList() from the runtime. */
  refreshImageList(): Promise<void>;
  run(signal: AbortSignal): Promise<void>;
}

async function statfsOf(path: string): Promise<{ capacity: number; available: number }> {
  const st = await fsStatfs(path);
  return { capacity: st.blocks * st.bsize, available: st.bavail * st.bsize };
}

/** The runtime's sandbox image, from containerd's verbose status (config.sandboxImage);
 * undefined for a runtime whose status does not name one (CRI-O pins its own instead). */
async function sandboxImage(cri: ImageGCDeps["cri"]): Promise<string | undefined> {
  const config = await containerdConfig(cri);
  return typeof config?.sandboxImage === "string" ? config.sandboxImage : undefined;
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

export function createImageGC(deps: ImageGCDeps): ImageGC {
  return new ImageGCManager(deps);
}

class ImageGCManager implements ImageGC {
  private records: Map<string, ImageUse> | undefined;
  private readonly store: ImageRecordStore;
  private list: ContainerImage[] | undefined;
  private running: Promise<unknown> = Promise.resolve();
  private lastFailed = false;

  constructor(private readonly deps: ImageGCDeps) {
    this.store = new ImageRecordStore(deps.recordsPath);
  }

  imageList(): ContainerImage[] | undefined {
    return this.list;
  }

  async refreshImageList(): Promise<void> {
    this.setList((await this.deps.cri.listImages({})).images);
  }

  garbageCollect(): Promise<ImagesFreed> {
    return this.serialized(() => this.pass());
  }

  deleteUnusedImages(): Promise<ImagesFreed> {
    return this.serialized(async () => {
      const now = this.deps.clock.now();
      const images = await this.detect(now);
      const result = await this.free(Number.POSITIVE_INFINITY, evictionOrder(images), now);
      this.persist();
      if (result.errors.length > 0) throw new Error(result.errors.join("; "));
      return result.freed;
    });
  }

  async run(signal: AbortSignal): Promise<void> {
    const { highThresholdPercent, maxAgeMs } = this.deps.policy;
    const enabled = highThresholdPercent < 100 || maxAgeMs > 0;
    if (!enabled) this.deps.logger.info("image GC is off: high threshold 100 and no maximum age");
    // The first pass runs at start, as the kubelet's does: the images are seen (first seen now
    // for one without a record) and an image already eligible goes at once, so a device that
    // restarts more often than the period still collects. Off, the images are still seen each
    // period, for the eviction manager's deleteUnusedImages.
    const pass = enabled ? () => this.periodic() : () => this.detectOnly();
    await Promise.all([
      this.loop(signal, this.deps.listPeriodMs ?? 30_000, () => this.refreshImageList(), true),
      this.loop(signal, this.deps.periodMs, pass, true),
    ]);
    await this.running;
    this.persist(0); // the last uses as they are, not as of the last write
  }

  /** Runs `fn` every `periodMs` (at once first when `first`); `fn` must not throw but for the
   * image list refresh, whose failure is logged. */
  private async loop(
    signal: AbortSignal,
    periodMs: number,
    fn: () => Promise<unknown>,
    first: boolean,
  ): Promise<void> {
    let wait = !first;
    while (!signal.aborted) {
      if (wait) await sleepQuietly(this.deps.clock, periodMs, signal);
      wait = true;
      if (signal.aborted) break;
      await fn().catch((err) =>
        this.deps.logger.warn("cannot list the images", { error: message(err) }),
      );
    }
  }

  /** One periodic pass, its failure logged (and reported when it repeats). */
  private async periodic(): Promise<void> {
    try {
      await this.garbageCollect();
      if (this.lastFailed) this.deps.logger.info("image garbage collection succeeded again");
      this.lastFailed = false;
    } catch (err) {
      const text = message(err);
      if (this.lastFailed) {
        this.deps.logger.error("image garbage collection failed again", { error: text });
        this.deps.nodeEvent("ImageGCFailed", text);
      } else {
        this.deps.logger.warn("image garbage collection failed", { error: text });
      }
      this.lastFailed = true;
    }
  }

  /** Looks at the images and updates the records, removing nothing; a failure is logged. */
  private detectOnly(): Promise<void> {
    return this.serialized(async () => {
      await this.detect(this.deps.clock.now());
      this.persist();
    }).catch((err) => this.deps.logger.warn("cannot look at the images", { error: message(err) }));
  }

  private serialized<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.running.then(fn, fn);
    this.running = next.catch(() => undefined);
    return next;
  }

  private async pass(): Promise<ImagesFreed> {
    const { policy } = this.deps;
    const now = this.deps.clock.now();
    const images = await this.detect(now);
    let candidates = evictionOrder(images);
    const freed: ImagesFreed = { images: 0, bytes: 0 };
    const errors: string[] = [];
    if (policy.maxAgeMs > 0) {
      const old = candidates.filter((i) => tooOld(i, now, policy.maxAgeMs));
      const aged = await this.removeAll(old, freed, errors);
      candidates = candidates.filter((i) => !aged.has(i.id));
    }
    try {
      const fs = await this.imageFs();
      const amount = bytesToFree(fs.capacity, fs.available, policy);
      if (amount !== undefined) {
        const usage = usagePercent(fs.capacity, fs.available);
        this.deps.logger.info("image filesystem over the high threshold: removing images", {
          usage,
          highThreshold: policy.highThresholdPercent,
          lowThreshold: policy.lowThresholdPercent,
          bytesToFree: amount,
        });
        const result = await this.free(amount, candidates, now);
        freed.images += result.freed.images;
        freed.bytes += result.freed.bytes;
        errors.push(...result.errors);
        if (result.errors.length === 0 && result.freed.bytes < amount) {
          const text = `Failed to garbage collect required amount of images. Attempted to free ${amount} bytes, but only found ${result.freed.bytes} bytes eligible to free.`;
          this.deps.nodeEvent("FreeDiskSpaceFailed", text);
          errors.push(text);
        }
      }
    } finally {
      this.persist();
      await this.refreshImageList().catch((err) =>
        this.deps.logger.warn("cannot list the images after a GC pass", { error: message(err) }),
      );
    }
    if (freed.images > 0) this.deps.logger.info("image GC removed images", { ...freed });
    if (errors.length > 0) throw new Error(errors.join("; "));
    return freed;
  }

  /** The image filesystem's size and free space (CRI ImageFsInfo, statfs of its mount point). */
  private async imageFs(): Promise<{ capacity: number; available: number }> {
    const info = await this.deps.cri.imageFsInfo({});
    const mountpoint = info.imageFilesystems[0]?.fsId?.mountpoint;
    if (!mountpoint) throw new Error("the runtime reports no image filesystem");
    const fs = await (this.deps.statfs ?? statfsOf)(mountpoint);
    if (fs.capacity <= 0) {
      const text = `invalid capacity ${fs.capacity} on image filesystem ${mountpoint}`;
      this.deps.nodeEvent("InvalidDiskCapacity", text);
      throw new Error(text);
    }
    return fs;
  }

  /** Looks at the runtime once and updates the records (loaded from disk the first time). */
  private async detect(now: number): Promise<TrackedImage[]> {
    // A runtime that cannot say which image is its sandbox image fails the pass: removing that
    // image would keep the next pod from starting on a device offline.
    const [images, containers, sandbox] = await Promise.all([
      this.deps.cri.listImages({}),
      this.deps.cri.listContainers({}),
      sandboxImage(this.deps.cri),
    ]);
    if (this.records === undefined) {
      this.records = await this.store.load().catch((err) => {
        this.deps.logger.warn("image records unusable: starting afresh", { error: message(err) });
        return new Map<string, ImageUse>();
      });
    }
    const used = new Set<string>();
    for (const c of containers.containers) {
      for (const ref of [c.imageRef, c.imageId, c.image?.image ?? ""]) {
        if (ref !== "") used.add(ref).add(normalizeName(ref));
      }
    }
    const pinned = new Set(sandbox === undefined ? [] : [normalizeName(sandbox)]);
    for (const name of this.deps.pinnedImages?.() ?? []) pinned.add(normalizeName(name));
    this.setList(images.images);
    return detectImages(images.images, used, pinned, this.records, now);
  }

  /** Removes candidates in order, skipping those younger than the minimum age, until `amount`
   * bytes are freed; a failed removal is recorded and the next candidate tried. */
  private async free(
    amount: number,
    candidates: readonly TrackedImage[],
    now: number,
  ): Promise<{ freed: ImagesFreed; errors: string[] }> {
    const freed: ImagesFreed = { images: 0, bytes: 0 };
    const errors: string[] = [];
    for (const image of candidates) {
      if (freed.bytes >= amount) break;
      if (image.lastUsed >= now || tooYoung(image, now, this.deps.policy.minAgeMs)) continue;
      await this.removeAll([image], freed, errors);
    }
    return { freed, errors };
  }

  private async removeAll(
    images: readonly TrackedImage[],
    freed: ImagesFreed,
    errors: string[],
  ): Promise<Set<string>> {
    const removed = new Set<string>();
    for (const image of images) {
      try {
        await this.deps.cri.removeImage({ image: { image: image.id } });
        this.records?.delete(image.id);
        removed.add(image.id);
        freed.images++;
        freed.bytes += image.size;
        this.deps.logger.info("removed an unused image", { image: image.id, size: image.size });
      } catch (err) {
        errors.push(`cannot remove image ${image.id}: ${message(err)}`);
      }
    }
    return removed;
  }

  private persist(granularityMs?: number): void {
    if (this.records === undefined || !this.store.needsSave(this.records, granularityMs)) return;
    const records = this.records;
    try {
      reportedWrite(this.deps.stateWrites ?? ignoreStateWrites, this.deps.recordsPath, () =>
        this.store.save(records),
      );
    } catch (err) {
      this.deps.logger.warn("cannot save image records", { error: message(err) });
    }
  }

  private setList(images: readonly Image[]): void {
    this.list = imageListForStatus(images, this.deps.maxImagesInStatus);
  }
}
