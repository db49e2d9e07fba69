// Image GC end to end: the compiled agent against a containerd of its own whose image filesystem
// is a 256 MiB ext4 (test/lib/small-containerd.ts), pulling the test bed's filler images of known
// sizes from its registry. One agent (one node name, one root dir) is run three times with
// different GC settings; its records of image use carry over each restart. Needs root and the
// test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { Node } from "../../src/api/node.ts";
import type { Event } from "../../src/api/types.ts";
import { createCriClient, type Image } from "../../src/cri/index.ts";
import { TestAgent } from "../lib/agent.ts";
import { shellPodManifest, sleeperManifest } from "../lib/manifests.ts";
import { SmallContainerd } from "../lib/small-containerd.ts";
import { eventually } from "../lib/testbed.ts";

const small = new SmallContainerd(256);
const agent = new TestAgent({ endpoint: small.endpoint });
const tb = agent.tb;
const cri = createCriClient({ endpoint: small.endpoint });
const [A, B, C, D] = [tb.filler["8m"], tb.filler["16m"], tb.filler["24m"], tb.filler["32m"]];
const E = tb.busyboxV2; // pulled last and never used: the youngest image
const MIN_AGE_S = 10;
const fast = [
  "--image-gc-period",
  "1s",
  "--minimum-image-ttl-duration",
  `${MIN_AGE_S}s`,
  "--node-status-update-frequency",
  "1s",
];

const keepManifest = shellPodManifest("keep", tb.busybox, "true", { restartPolicy: "Never" });

async function images(): Promise<Image[]> {
  return (await cri.listImages({})).images;
}
async function tags(): Promise<string[]> {
  return (await images()).flatMap((i) => i.repoTags).sort();
}
const has = (list: string[], ...refs: string[]) => refs.every((r) => list.includes(r));
const running = (name: string) =>
  agent.waitPod(name, "Running", (p) => p.status?.phase === "Running", 60_000);

async function nodeEvents(reason: string): Promise<Event[]> {
  const res = await agent.request("/api/v1/events");
  const { items } = (await res.json()) as { items: Event[] };
  return items.filter((e) => e.involvedObject.kind === "Node" && e.reason === reason);
}

beforeAll(() => small.start(), 30_000);
afterAll(async () => {
  await agent.cleanup();
  cri.close();
  await small.stop();
}, 60_000);

describe("image GC on a small image filesystem (needs root and the test bed)", () => {
  let records: Record<string, { firstDetected: number; lastUsed: number }>;
  let ids: Record<string, string>;

  test("records when each image was first seen and last used, in <rootDir>/state/image-gc.json", async () => {
    agent.args = [...fast, "--image-gc-high-threshold", "95", "--image-gc-low-threshold", "90"];
    await agent.start();
    agent.writeManifest("keep.yaml", keepManifest);
    for (const [name, image] of [
      ["a", A],
      ["b", B],
      ["c", C],
    ] as const) {
      agent.writeManifest(`${name}.yaml`, sleeperManifest(name, image));
    }
    await Promise.all(["a", "b", "c"].map(running));
    await agent.waitPod("keep", "Succeeded", (p) => p.status?.phase === "Succeeded");
    await Bun.sleep(2500); // GC passes see a, b and c in use
    // Deleted one after the other: a's image is the least recently used, then b's, then c's.
    for (const name of ["a", "b", "c"]) {
      agent.removeManifest(`${name}.yaml`);
      await eventually(`pod ${name} to be gone`, async () => (await agent.pod(name)) === undefined);
      await Bun.sleep(1500);
    }
    await agent.stop();
    ids = Object.fromEntries((await images()).flatMap((i) => i.repoTags.map((t) => [t, i.id])));
    const file = join(agent.rootDir, "state", "image-gc.json");
    records = JSON.parse(readFileSync(file, "utf8")).images;
    const used = (ref: string) => records[ids[ref] ?? ""]?.lastUsed ?? 0;
    expect(used(A)).toBeGreaterThan(0);
    expect(used(A)).toBeLessThan(used(B));
    expect(used(B)).toBeLessThan(used(C));
  }, 120_000);

  test("over the high threshold after a restart: least recently used unused images go, down to the low mark", async () => {
    // Pulled while the agent is down: the image filesystem crosses the thresholds set below.
    await cri.pullImage({ image: { image: D } });
    await cri.pullImage({ image: { image: E } });
    const firstSeen = Math.max(...[A, B, C].map((r) => records[ids[r] ?? ""]?.firstDetected ?? 0));
    const wait = firstSeen + (MIN_AGE_S + 1) * 1000 - Date.now();
    if (wait > 0) await Bun.sleep(wait);
    const size = Object.fromEntries(
      (await images()).flatMap((i) => i.repoTags.map((t) => [t, i.size])),
    );
    const [sA, sB] = [size[A] ?? 0, size[B] ?? 0];
    // Thresholds that make the GC free more than a's image but no more than a's and b's
    // together (sizes as the runtime reports them): usage is at the high mark now.
    const fs = small.usage();
    const low = Math.floor(100 - (100 * (fs.available + sA + sB / 2)) / fs.capacity);
    const toFree = Math.floor((fs.capacity * (100 - low)) / 100) - fs.available;
    expect(toFree).toBeGreaterThan(sA);
    expect(toFree).toBeLessThanOrEqual(sA + sB);
    // The high mark a little under today's usage, which may move by a few blocks before the pass.
    const high = Math.max(low + 1, fs.percent - 2);
    expect(high).toBeLessThanOrEqual(fs.percent);
    agent.args = [
      ...fast,
      "--image-gc-high-threshold",
      String(high),
      "--image-gc-low-threshold",
      String(low),
    ];
    agent.writeManifest("d.yaml", sleeperManifest("d", D));
    await agent.start();
    await eventually("a's and b's images to be removed", async () => {
      const now = await tags();
      return !now.includes(A) && !now.includes(B);
    });
    await running("d");
    await Bun.sleep(2500); // two more passes: nothing else goes
    const left = await tags();
    // c: used more recently; d: in use; E: younger than the minimum age; busybox: used by the
    // keep pod's stopped container; the sandbox image: pinned as the runtime's.
    expect(has(left, C, D, E, tb.busybox, tb.sandboxImage)).toBe(true);
    expect(left).toHaveLength(5);
    expect(small.usage().percent).toBeLessThanOrEqual(low);
  }, 120_000);

  test("Node.status.images lists every image, largest first, with its names and size", async () => {
    const present = await images();
    const node = await eventually("the node to list its images", async () => {
      const res = await agent.request(`/api/v1/nodes/${agent.nodeName}`);
      const n = (await res.json()) as Node;
      return n.status.images?.length === present.length ? n : undefined;
    });
    const reported = node.status.images ?? [];
    expect(reported.map((i) => i.sizeBytes)).toEqual(
      present.map((i) => i.size).sort((x, y) => y - x),
    );
    expect(reported[0]?.names).toContain(D);
    for (const image of present) {
      const entry = reported.find((r) => r.names.includes(image.repoTags[0] ?? ""));
      expect(entry?.sizeBytes).toBe(image.size);
    }
    await agent.stop();
  }, 60_000);

  test("imageMaximumGCAge removes images unused for that long with the disk far from full", async () => {
    const far = small.usage().percent;
    expect(far).toBeLessThan(70);
    agent.args = [
      "--image-gc-period",
      "1s",
      "--minimum-image-ttl-duration",
      "1s",
      "--image-maximum-gc-age",
      "4s",
      "--image-gc-high-threshold",
      "95",
      "--image-gc-low-threshold",
      "90",
      "--node-status-update-frequency",
      "1s",
    ];
    await agent.start();
    await eventually("c's image and the never used one to be removed", async () => {
      const now = await tags();
      return !now.includes(C) && !now.includes(E);
    });
    const left = await tags();
    expect(left.sort()).toEqual([D, tb.busybox, tb.sandboxImage].sort());
  }, 60_000);

  test("a pass that cannot free enough is a FreeDiskSpaceFailed node event, two in a row ImageGCFailed", async () => {
    // Fill the image filesystem to 97 % with a file nothing can remove: only used and pinned
    // images are left.
    const filler = join(small.root, "filler");
    const fs = small.usage();
    const bytes = fs.available - Math.ceil(fs.capacity * 0.03);
    execFileSync("fallocate", ["-l", String(bytes), filler]);
    try {
      expect(small.usage().percent).toBeGreaterThanOrEqual(95);
      const failed = await eventually("a FreeDiskSpaceFailed event", async () => {
        const e = await nodeEvents("FreeDiskSpaceFailed");
        return e.length > 0 ? e : undefined;
      });
      expect(failed[0]?.type).toBe("Warning");
      expect(failed[0]?.involvedObject.name).toBe(agent.nodeName);
      expect(failed[0]?.message).toMatch(
        /^Failed to garbage collect required amount of images\. Attempted to free \d+ bytes, but only found 0 bytes eligible to free\.$/,
      );
      await eventually("an ImageGCFailed event", async () => {
        return (await nodeEvents("ImageGCFailed")).length > 0;
      });
      expect((await tags()).sort()).toEqual([D, tb.busybox, tb.sandboxImage].sort());
    } finally {
      rmSync(filler, { force: true });
    }
  }, 60_000);
});
