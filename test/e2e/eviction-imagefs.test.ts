// Image filesystem pressure relieved by image GC evicts no pod (the kubelet's e2e calls it
// ImageGCNoEviction): the compiled agent against a containerd of its own whose image filesystem
// is a 256 MiB ext4 (test/lib/small-containerd.ts); a running pod, then unused filler images of
// known sizes pulled past an imagefs.available threshold set relative to what was free before.
// They are pulled while the agent is stopped (its pod keeps running), so that its first cycle
// meets the whole pressure at once: a cycle landing between two pulls would rightly find the
// filesystem still filling and evict. Coming back under pressure, the agent must not reject the
// pod whose container runs already (admission under pressure is for new pods). The eviction
// manager's node-level reclaim (dead containers, then unused images) brings the filesystem back
// above the threshold, and no pod is evicted. Needs root and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { statfsSync } from "node:fs";
import type { Event, Pod } from "../../src/api/types.ts";
import { createCriClient } from "../../src/cri/index.ts";
import { TestAgent } from "../lib/agent.ts";
import {
  containerIdOf,
  evictionArgs,
  isRunning,
  Mi,
  nodeOf,
  podManifest,
} from "../lib/eviction.ts";
import { SmallContainerd } from "../lib/small-containerd.ts";
import { eventually, loadTestbed } from "../lib/testbed.ts";

const small = new SmallContainerd(256);
const cri = createCriClient({ endpoint: small.endpoint });
const agents: TestAgent[] = [];

const available = () => {
  const s = statfsSync(small.root);
  return s.bavail * s.bsize;
};

beforeAll(() => small.start(), 30_000);
afterAll(async () => {
  for (const a of agents) await a.cleanup();
  cri.close();
  await small.stop();
}, 60_000);

describe("image filesystem pressure (needs root and the test bed)", () => {
  test("relieved by image GC: unused images are removed and no pod is evicted", async () => {
    const tb = loadTestbed();
    // What the running pod needs is on the filesystem before the threshold is taken.
    await cri.pullImage({ image: { image: tb.busybox } });
    await cri.pullImage({ image: { image: tb.sandboxImage } });
    const threshold = Math.floor((available() - 40 * Mi) / Mi);
    const agent = new TestAgent({
      endpoint: small.endpoint,
      args: [
        "--eviction-hard",
        `imagefs.available<${threshold}Mi`,
        "--minimum-image-ttl-duration",
        "0s",
        "--image-gc-period",
        "1h",
        ...evictionArgs("2s"),
      ],
    });
    agents.push(agent);
    await agent.start();
    agent.writeManifest("keep.yaml", podManifest(agent, "keep", { script: "sleep 3600" }));
    const keep = await agent.waitPod("keep", "Running", isRunning);
    await agent.stop();
    // 24 + 32 MiB that do not compress: twice that on the filesystem (blobs and snapshots).
    for (const image of [tb.filler["24m"], tb.filler["32m"]])
      await cri.pullImage({ image: { image } });
    expect(available()).toBeLessThan(threshold * Mi);
    await agent.start();
    const node = await eventually("DiskPressure to be True", async () => {
      const n = await nodeOf(agent);
      return n.status.conditions?.find((c) => c.type === "DiskPressure")?.status === "True"
        ? n
        : undefined;
    });
    expect(node.metadata.name).toBe(agent.nodeName);
    const tags = async () => (await cri.listImages({})).images.flatMap((i) => i.repoTags);
    await eventually("the filler images to be removed", async () => {
      const t = await tags();
      return !t.includes(tb.filler["24m"]) && !t.includes(tb.filler["32m"]);
    });
    expect(await tags()).toContain(tb.busybox);
    // containerd frees an image's blobs and snapshots in its own GC, moments after the removal.
    await eventually(
      "the filesystem to be above the threshold",
      () => available() > threshold * Mi,
    );
    await eventually(
      "DiskPressure to be False again",
      async () =>
        (await nodeOf(agent)).status.conditions?.find((c) => c.type === "DiskPressure")?.status ===
        "False",
      20_000,
    );
    const events = ((await (await agent.request("/api/v1/events")).json()) as { items: Event[] })
      .items;
    expect(events.some((e) => e.reason === "EvictionThresholdMet")).toBe(true);
    expect(events.filter((e) => e.reason === "Evicted")).toEqual([]);
    expect(agent.output).toContain("reduced resource pressure without evicting pods");
    const now = (await agent.pod("keep")) as Pod;
    expect(isRunning(now)).toBe(true);
    expect(containerIdOf(now)).toBe(containerIdOf(keep));
  }, 120_000);
});
