// Disk pressure for real: the agent's root dir (the node filesystem, where emptyDir volumes live)
// is a small tmpfs of its own with few inodes, mounted by the test and unmounted in its cleanup;
// pods fill it with bytes or files, and write past their own local storage limits. The image
// filesystem stays the test bed's containerd filesystem. Needs root and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import {
  conditionOf,
  containerIdOf,
  evictionArgs,
  isEvictedAndStopped,
  isRunning,
  podManifest,
} from "../lib/eviction.ts";
import { eventually } from "../lib/testbed.ts";

const agent = new TestAgent({
  rootDirMount: ["-t", "tmpfs", "-o", "size=64m,nr_inodes=5000", "tmpfs"],
  args: ["--eviction-hard", "nodefs.available<24Mi,nodefs.inodesFree<2000", ...evictionArgs("2s")],
});

beforeAll(() => agent.start(), 30_000);
afterAll(() => agent.cleanup(), 60_000);

const diskPressureFalse = () =>
  eventually(
    "DiskPressure to be False",
    async () => (await conditionOf(agent, "DiskPressure")) === "False",
    20_000,
  );

describe("disk pressure on a small node filesystem (needs root and the test bed)", () => {
  let calm: Pod;

  test("pods over their own emptyDir sizeLimit or ephemeral-storage limit are evicted with the kubelet's messages", async () => {
    agent.writeManifest(
      "calm.yaml",
      podManifest(agent, "calm", { priority: 1000, script: "sleep 3600" }),
    );
    calm = await agent.waitPod("calm", "Running", isRunning);
    agent.writeManifest(
      "sized.yaml",
      podManifest(agent, "sized", {
        emptyDir: "2Mi",
        script: "dd if=/dev/zero of=/data/f bs=1M count=4 && sleep 3600",
      }),
    );
    // Written to the container's writable layer, which the runtime measures (CRI stats).
    agent.writeManifest(
      "limited.yaml",
      podManifest(agent, "limited", {
        limits: { "ephemeral-storage": "2Mi" },
        script: "dd if=/dev/zero of=/tmp/f bs=1M count=4 && sleep 3600",
      }),
    );
    const [sized, limited] = await Promise.all([
      agent.waitPod("sized", "evicted", isEvictedAndStopped, 30_000),
      agent.waitPod("limited", "evicted", isEvictedAndStopped, 40_000),
    ]);
    agent.removeManifest("sized.yaml");
    agent.removeManifest("limited.yaml");
    expect(sized.status?.message).toBe('Usage of EmptyDir volume "data" exceeds the limit "2Mi". ');
    expect(limited.status?.message).toBe(
      "Pod ephemeral local storage usage exceeds the total limit of containers 2Mi. ",
    );
    // No node pressure: the kubelet sets no DisruptionTarget for these.
    expect(sized.status?.conditions?.some((c) => c.type === "DisruptionTarget")).toBe(false);
    expect(await conditionOf(agent, "DiskPressure")).toBe("False");
  }, 60_000);

  test("a pod filling an emptyDir on the node filesystem is evicted, its volume freed, and DiskPressure clears", async () => {
    agent.writeManifest(
      "filler.yaml",
      podManifest(agent, "filler", {
        emptyDir: "",
        script: "dd if=/dev/zero of=/data/f bs=1M count=48; sleep 3600",
      }),
    );
    const running = await agent.waitPod("filler", "started", (p) => containerIdOf(p) !== undefined);
    const filler = await agent.waitPod("filler", "evicted", isEvictedAndStopped, 30_000);
    agent.removeManifest("filler.yaml");
    expect(filler.status?.message).toStartWith(
      "The node was low on resource: ephemeral-storage. Threshold quantity: 24Mi, available: ",
    );
    expect(filler.status?.conditions?.find((c) => c.type === "DisruptionTarget")?.status).toBe(
      "True",
    );
    // An evicted pod's content goes although its manifest was still there.
    const volume = join(agent.rootDir, "pods", running.metadata.uid as string, "volumes");
    await eventually("the filler's volume to be removed", () => !existsSync(volume), 10_000);
    await diskPressureFalse();
  }, 60_000);

  test("a pod creating many small files is evicted for nodefs.inodesFree", async () => {
    agent.writeManifest(
      "files.yaml",
      podManifest(agent, "files", {
        emptyDir: "",
        script: "i=0; while [ $i -lt 3500 ]; do : > /data/f$i; i=$((i+1)); done; sleep 3600",
      }),
    );
    const files = await agent.waitPod("files", "evicted", isEvictedAndStopped, 40_000);
    agent.removeManifest("files.yaml");
    expect(files.status?.message).toMatch(
      /^The node was low on resource: inodes\. Threshold quantity: 2k, available: \d+\. $/,
    );
    await diskPressureFalse();
    const now = (await agent.pod("calm")) as Pod;
    expect(isRunning(now)).toBe(true);
    expect(containerIdOf(now)).toBe(containerIdOf(calm));
  }, 60_000);
});
