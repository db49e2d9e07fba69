import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  bytesToFree,
  createImageGC,
  detectImages,
  evictionOrder,
  type ImageUse,
  imageListForStatus,
  RECORD_SAVE_GRANULARITY_MS,
  type TrackedImage,
  tooOld,
  usagePercent,
} from "../../../src/agent/images/index.ts";
import { createFakeRuntime, type FakeRuntime, type Image } from "../../../src/cri/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { until } from "../../lib/until.ts";

const MIN = 60_000;

function image(id: string, size: number, extra: Partial<Image> = {}): Image {
  return {
    id,
    repoTags: [`example.com/${id}:1`],
    repoDigests: [],
    size,
    uid: null,
    username: "",
    spec: null,
    pinned: false,
    ...extra,
  };
}

describe("image GC decisions", () => {
  test("detectImages() records first sight and use, and forgets images no longer listed", () => {
    const records = new Map<string, ImageUse>([
      ["old", { firstDetected: 5, lastUsed: 7 }],
      ["gone", { firstDetected: 1, lastUsed: 1 }],
    ]);
    const tracked = detectImages(
      [image("old", 10), image("new", 20), image("used", 30)],
      new Set(["example.com/used:1"]),
      new Set(),
      records,
      100,
    );
    expect(tracked.map((t) => [t.id, t.firstDetected, t.lastUsed, t.inUse])).toEqual([
      ["old", 5, 7, false],
      ["new", 100, 0, false],
      ["used", 100, 100, true],
    ]);
    expect([...records.keys()]).toEqual(["old", "new", "used"]);
  });

  test("detectImages() pins the runtime's sandbox image by its normalized name", () => {
    const tracked = detectImages(
      [image("p", 1, { repoTags: ["docker.io/library/pause:3.9"] }), image("q", 1)],
      new Set(),
      new Set(["docker.io/library/pause:3.9"]),
      new Map(),
      0,
    );
    expect(tracked.map((t) => t.pinned)).toEqual([true, false]);
  });

  test("evictionOrder() leaves out used and pinned images, least recently used first", () => {
    const t = (id: string, lastUsed: number, firstDetected: number, more = {}): TrackedImage => ({
      id,
      size: 1,
      lastUsed,
      firstDetected,
      inUse: false,
      pinned: false,
      ...more,
    });
    const order = evictionOrder([
      t("b", 20, 1),
      t("used", 0, 0, { inUse: true }),
      t("a", 10, 5),
      t("never2", 0, 9),
      t("pinned", 0, 0, { pinned: true }),
      t("never1", 0, 3),
    ]);
    expect(order.map((i) => i.id)).toEqual(["never1", "never2", "a", "b"]);
  });

  test("tooOld() counts from the last use, or from first sight for an image never used", () => {
    expect(tooOld({ firstDetected: 0, lastUsed: 100 }, 200, 99)).toBe(true);
    expect(tooOld({ firstDetected: 0, lastUsed: 100 }, 200, 100)).toBe(false);
    expect(tooOld({ firstDetected: 150, lastUsed: 0 }, 200, 60)).toBe(false);
    expect(tooOld({ firstDetected: 0, lastUsed: 0 }, 1e12, 0)).toBe(false);
  });

  test("bytesToFree() is undefined below the high threshold, else down to the low one", () => {
    const policy = { highThresholdPercent: 85, lowThresholdPercent: 80 };
    expect(usagePercent(1000, 151)).toBe(85);
    expect(bytesToFree(1000, 151, policy)).toBe(49);
    expect(bytesToFree(1000, 160, policy)).toBeUndefined();
    expect(bytesToFree(1000, 0, { highThresholdPercent: 0, lowThresholdPercent: 0 })).toBe(1000);
  });

  test("imageListForStatus() lists the largest first, at most N, five names each", () => {
    const names = {
      repoDigests: ["r@sha256:1", "r@sha256:2"],
      repoTags: ["r:1", "r:2", "r:3", "r:4"],
    };
    const list = imageListForStatus([image("a", 5), image("b", 50, names), image("c", 20)], 2);
    expect(list).toEqual([
      { names: ["r@sha256:1", "r@sha256:2", "r:1", "r:2", "r:3"], sizeBytes: 50 },
      { names: ["example.com/c:1"], sizeBytes: 20 },
    ]);
    expect(imageListForStatus([image("a", 5), image("b", 6)], -1)).toHaveLength(2);
  });
});

let dirs: string[] = [];
afterEach(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
});

/** The fake runtime with a 1000-byte image filesystem: what is free is 1000 minus the base and
 * the sizes of the images present. */
function setup(
  policy: Partial<Parameters<typeof createImageGC>[0]["policy"]> = {},
  dir?: string,
  pinnedImages?: () => Iterable<string>,
) {
  const root = dir ?? mkdtempSync(join(tmpdir(), "fleetlet-imagegc-"));
  if (dir === undefined) dirs.push(root);
  const clock = new FakeClock();
  const cri = createFakeRuntime({ now: () => clock.now() });
  const events: string[] = [];
  let base = 100;
  const make = (c: FakeClock, r: FakeRuntime) =>
    createImageGC({
      cri: r,
      clock: c,
      logger: nullLogger,
      policy: {
        highThresholdPercent: 85,
        lowThresholdPercent: 60,
        minAgeMs: 2 * MIN,
        maxAgeMs: 0,
        ...policy,
      },
      periodMs: 5 * MIN,
      maxImagesInStatus: 50,
      recordsPath: join(root, "state", "image-gc.json"),
      nodeEvent: (reason, message) => events.push(`${reason}: ${message}`),
      statfs: async () => {
        let used = base;
        for (const i of r.images.present.values()) used += i.size;
        return { capacity: 1000, available: 1000 - used };
      },
      ...(pinnedImages !== undefined && { pinnedImages }),
    });
  const gc = make(clock, cri);
  const present = () => [...cri.images.present.values()].flatMap((i) => i.repoTags).sort();
  const setBase = (b: number) => {
    base = b;
  };
  return { root, clock, cri, gc, events, present, setBase, make };
}

/** Runs a container of `ref` in the fake, and lets it exit unless `running`. */
async function useImage(cri: FakeRuntime, ref: string, running = false): Promise<string> {
  const config = { metadata: { name: ref, namespace: "default", uid: ref, attempt: 0 } };
  const { podSandboxId } = await cri.runPodSandbox({ config });
  const { containerId } = await cri.createContainer({
    podSandboxId,
    sandboxConfig: config,
    config: { metadata: { name: "c", attempt: 0 }, image: { image: ref } },
  });
  await cri.startContainer({ containerId });
  if (!running) cri.exitContainer(containerId, 0);
  return containerId;
}

describe("createImageGC() with the fake runtime", () => {
  test("over the high threshold removes unused images, least recently used first, down to the low one", async () => {
    const { clock, cri, gc, present, setBase } = setup();
    setBase(0);
    for (const [ref, size] of [
      ["a", 100],
      ["b", 200],
      ["c", 300],
      ["d", 200],
    ] as const) {
      cri.images.add(`example.com/${ref}:1`, { size });
    }
    // a and b used long ago (a first), c used later, d in use by an exited container.
    const ca = await useImage(cri, "example.com/a:1");
    const cb = await useImage(cri, "example.com/b:1");
    await gc.garbageCollect();
    await cri.removeContainer({ containerId: ca });
    clock.step(MIN);
    await gc.garbageCollect();
    await cri.removeContainer({ containerId: cb });
    clock.step(MIN);
    await gc.garbageCollect();
    const cc = await useImage(cri, "example.com/c:1");
    await useImage(cri, "example.com/d:1");
    clock.step(MIN);
    await gc.garbageCollect();
    await cri.removeContainer({ containerId: cc });
    clock.step(MIN);
    expect(present()).toHaveLength(4);
    setBase(100);
    // usage 90 %: down to 60 % means 300 bytes; a (100) and b (200) are enough.
    expect(await gc.garbageCollect()).toEqual({ images: 2, bytes: 300 });
    expect(present()).toEqual(["example.com/c:1", "example.com/d:1"]);
  });

  test("never removes a pinned image, the runtime's sandbox image, or one younger than the minimum age", async () => {
    const { clock, cri, gc, present, events } = setup({ lowThresholdPercent: 10 });
    cri.statusInfo = { config: JSON.stringify({ sandboxImage: "example.com/pause:1" }) };
    cri.images.add("example.com/pinned:1", { size: 100, pinned: true });
    cri.images.add("example.com/pause:1", { size: 100 });
    cri.images.add("example.com/old:1", { size: 400 });
    await gc.garbageCollect();
    clock.step(3 * MIN);
    cri.images.add("example.com/young:1", { size: 300 });
    await expect(gc.garbageCollect()).rejects.toThrow(
      "Failed to garbage collect required amount of images. Attempted to free 900 bytes, but only found 400 bytes eligible to free.",
    );
    expect(present()).toEqual([
      "example.com/pause:1",
      "example.com/pinned:1",
      "example.com/young:1",
    ]);
    expect(events).toEqual([
      "FreeDiskSpaceFailed: Failed to garbage collect required amount of images. Attempted to free 900 bytes, but only found 400 bytes eligible to free.",
    ]);
  });

  test("never removes an image pinned by name (imported from an archive still in the folder), while it is pinned", async () => {
    let pinned = ["imported:1"];
    const { clock, cri, gc, present } = setup({ maxAgeMs: 10 * MIN }, undefined, () => pinned);
    cri.images.add("docker.io/library/imported:1", { size: 10 });
    cri.images.add("example.com/other:1", { size: 10 });
    await gc.garbageCollect();
    clock.step(11 * MIN);
    await gc.garbageCollect();
    expect(present()).toEqual(["docker.io/library/imported:1"]);
    pinned = [];
    await gc.garbageCollect();
    expect(present()).toEqual([]);
  });

  test("imageMaximumGCAge removes an image unused for that long with the disk far from full", async () => {
    const { clock, cri, gc, present } = setup({ maxAgeMs: 10 * MIN });
    cri.images.add("example.com/old:1", { size: 10 });
    cri.images.add("example.com/recent:1", { size: 10 });
    cri.images.add("example.com/used:1", { size: 10 });
    await useImage(cri, "example.com/used:1", true);
    const recent = await useImage(cri, "example.com/recent:1");
    await gc.garbageCollect();
    clock.step(6 * MIN);
    await gc.garbageCollect();
    await cri.removeContainer({ containerId: recent });
    clock.step(5 * MIN);
    // old: first seen 11 min ago, never used; recent: used 5 min ago; used: in use.
    expect(await gc.garbageCollect()).toEqual({ images: 1, bytes: 10 });
    expect(present()).toEqual(["example.com/recent:1", "example.com/used:1"]);
  });

  test("keeps first sight and last use across a restart, in <rootDir>/state/image-gc.json", async () => {
    const first = setup({ lowThresholdPercent: 70 });
    const { clock, cri, root } = first;
    cri.images.add("example.com/a:1", { size: 200 });
    cri.images.add("example.com/b:1", { size: 200 });
    const ca = await useImage(cri, "example.com/a:1");
    await first.gc.garbageCollect();
    await cri.removeContainer({ containerId: ca });
    clock.step(3 * MIN);
    const saved = JSON.parse(readFileSync(join(root, "state", "image-gc.json"), "utf8"));
    expect(Object.values(saved.images)).toHaveLength(2);
    // A new agent on the same runtime and root dir, over the threshold at its first pass (90 %,
    // 200 bytes to free). Without the records every image would be new (the minimum age keeps
    // them all) and a, listed first, would look as unused as b.
    cri.images.add("example.com/c:1", { size: 400 });
    const again = first.make(clock, cri);
    expect(await again.garbageCollect()).toEqual({ images: 1, bytes: 200 });
    // b was never used: it goes first; a (used 3 minutes ago) stays; c is new.
    expect(first.present()).toEqual(["example.com/a:1", "example.com/c:1"]);
  });

  test("writes the records only when images come or go, or a last use moved on by 10 minutes", async () => {
    const { clock, cri, gc, root } = setup();
    const file = join(root, "state", "image-gc.json");
    cri.images.add("example.com/a:1", { size: 1 });
    await useImage(cri, "example.com/a:1", true);
    await gc.garbageCollect();
    const written = readFileSync(file, "utf8");
    clock.step(RECORD_SAVE_GRANULARITY_MS / 2);
    await gc.garbageCollect();
    expect(readFileSync(file, "utf8")).toBe(written);
    clock.step(RECORD_SAVE_GRANULARITY_MS);
    await gc.garbageCollect();
    expect(readFileSync(file, "utf8")).not.toBe(written);
  });

  test("run() writes the last uses as they are when it stops", async () => {
    const { clock, cri, gc, root } = setup();
    const file = join(root, "state", "image-gc.json");
    cri.images.add("example.com/a:1", { size: 1 });
    await useImage(cri, "example.com/a:1", true);
    const ac = new AbortController();
    const loop = gc.run(ac.signal);
    await until("both loops to wait", () => clock.pending === 2);
    clock.step(5 * MIN);
    await until("the second pass", () => cri.callsOf("imageFsInfo").length === 2);
    const lastUse = () => Object.values(JSON.parse(readFileSync(file, "utf8")).images)[0];
    expect(lastUse()).toMatchObject({ lastUsed: clock.now() - 5 * MIN });
    ac.abort();
    await loop;
    expect(lastUse()).toMatchObject({ lastUsed: clock.now() });
  });

  test("starts afresh from a malformed records file", async () => {
    const root = mkdtempSync(join(tmpdir(), "fleetlet-imagegc-"));
    dirs.push(root);
    const { mkdirSync } = await import("node:fs");
    mkdirSync(join(root, "state"));
    writeFileSync(join(root, "state", "image-gc.json"), "{not json");
    const { cri, gc } = setup({}, root);
    cri.images.add("example.com/a:1", { size: 1 });
    expect(await gc.garbageCollect()).toEqual({ images: 0, bytes: 0 });
    const saved = JSON.parse(readFileSync(join(root, "state", "image-gc.json"), "utf8"));
    expect(Object.keys(saved.images)).toHaveLength(1);
  });

  test("deleteUnusedImages() removes every unused image past the minimum age and says what it freed", async () => {
    const { clock, cri, gc, present } = setup();
    cri.images.add("example.com/a:1", { size: 10 });
    cri.images.add("example.com/used:1", { size: 20 });
    await useImage(cri, "example.com/used:1");
    await gc.garbageCollect();
    clock.step(3 * MIN);
    cri.images.add("example.com/young:1", { size: 30 });
    expect(await gc.deleteUnusedImages()).toEqual({ images: 1, bytes: 10 });
    expect(present()).toEqual(["example.com/used:1", "example.com/young:1"]);
  });

  test("run() passes at start, then every period; a second failed pass in a row is ImageGCFailed", async () => {
    const { clock, cri, gc, events, setBase } = setup();
    setBase(900);
    cri.images.add("example.com/a:1", { size: 50 });
    const ac = new AbortController();
    const loop = gc.run(ac.signal);
    await until("the image list", () => gc.imageList() !== undefined);
    expect(gc.imageList()?.map((i) => i.sizeBytes)).toEqual([50]);
    expect(gc.imageList()?.[0]?.names).toContain("example.com/a:1");
    // The pass at start: a is first seen now, too young to go, so too little can be freed.
    await until("the pass at start", () => events.length === 1);
    await until("the GC loop to wait", () => clock.pending === 2);
    expect(cri.callsOf("imageFsInfo")).toHaveLength(1);
    expect(cri.callsOf("removeImage")).toHaveLength(0);
    // One period later a is old enough and goes, which is still too little: failed twice.
    clock.step(5 * MIN);
    await until("three events", () => events.length >= 3);
    expect(cri.callsOf("removeImage")).toHaveLength(1);
    expect(events.map((e) => e.split(":")[0])).toEqual([
      "FreeDiskSpaceFailed",
      "FreeDiskSpaceFailed",
      "ImageGCFailed",
    ]);
    ac.abort();
    await loop;
  });

  test("run() at start removes at once an image its records show unused past the maximum age", async () => {
    const first = setup({ maxAgeMs: 3 * MIN });
    const { clock, cri, present } = first;
    cri.images.add("example.com/old:1", { size: 10 });
    cri.images.add("example.com/used:1", { size: 10 });
    await useImage(cri, "example.com/used:1", true);
    await first.gc.garbageCollect(); // an agent that ran once, then stopped
    clock.step(4 * MIN);
    const again = first.make(clock, cri);
    const ac = new AbortController();
    const loop = again.run(ac.signal);
    await until("old to go", () => !present().includes("example.com/old:1"));
    await until("both loops to wait", () => clock.pending === 2);
    expect(present()).toEqual(["example.com/used:1"]);
    ac.abort();
    await loop;
  });

  test("run() with no image GC still looks at the images at start and each period, removing nothing", async () => {
    const { clock, cri, gc, root } = setup({ highThresholdPercent: 100, lowThresholdPercent: 0 });
    cri.images.add("example.com/a:1", { size: 1 });
    const ac = new AbortController();
    const loop = gc.run(ac.signal);
    await until("both loops to wait", () => clock.pending === 2);
    // Seen at start: the records the eviction manager's deleteUnusedImages ages images by.
    const saved = JSON.parse(readFileSync(join(root, "state", "image-gc.json"), "utf8"));
    expect(Object.values(saved.images)).toEqual([{ firstDetected: clock.now(), lastUsed: 0 }]);
    clock.step(60 * MIN);
    await until("both loops to wait again", () => clock.pending === 2);
    expect(cri.callsOf("listContainers")).toHaveLength(2);
    expect(cri.callsOf("removeImage")).toHaveLength(0);
    expect(cri.callsOf("imageFsInfo")).toHaveLength(0);
    ac.abort();
    await loop;
  });
});
