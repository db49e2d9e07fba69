// Container GC end to end: the compiled agent on the test bed's containerd, collecting dead
// containers every half second with the kubelet's per-container limit (1) and a global limit of
// 2, across agent restarts. Needs root and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import type { Pod } from "../../src/api/types.ts";
import { createCriClient } from "../../src/cri/index.ts";
import { TestAgent } from "../lib/agent.ts";
import { shellPodManifest } from "../lib/manifests.ts";
import { eventually } from "../lib/testbed.ts";

const agent = new TestAgent({
  args: [
    "--container-gc-period",
    "500ms",
    "--maximum-dead-containers",
    "2",
    "--crash-loop-back-off-base",
    "200ms",
    "--crash-loop-back-off-max",
    "400ms",
  ],
});
const cri = createCriClient({ endpoint: agent.tb.endpoint });

/** A pod whose container fails `failures` times (counted in an emptyDir) and then keeps running. */
function failingThenRunning(name: string, failures: number): string {
  const script = `n=$(cat /data/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /data/n; echo "run $n"; if [ $n -gt ${failures} ]; then exec sleep 3600; fi; exit 1`;
  return shellPodManifest(name, agent.tb.busybox, script, { data: true });
}

const restarts = (p: Pod) => p.status?.containerStatuses?.[0]?.restartCount ?? 0;
const isRunning = (p: Pod) => p.status?.containerStatuses?.[0]?.state?.running !== undefined;

/** The pod's containers in the runtime, by state. */
async function containersOf(name: string) {
  const { containers } = await cri.listContainers({
    filter: { labelSelector: { "io.kubernetes.pod.name": `${name}-${agent.nodeName}` } },
  });
  return {
    ids: containers.map((c) => c.id).sort(),
    dead: containers.filter((c) => c.state !== "CONTAINER_RUNNING").length,
    running: containers.filter((c) => c.state === "CONTAINER_RUNNING").length,
  };
}

/** The files of the pod's log folder for container c, or undefined when the folder is gone. */
function logFiles(pod: Pod): string[] | undefined {
  const dir = join(agent.logsDir, `default_${pod.metadata.name}_${pod.metadata.uid}`, "c");
  return existsSync(dir) ? readdirSync(dir).sort() : undefined;
}

beforeAll(() => agent.start(), 30_000);
afterAll(async () => {
  await agent.cleanup();
  cri.close();
}, 60_000);

describe("container GC (needs root and the test bed)", () => {
  let crash: Pod;

  test("a crash-looping pod keeps one dead instance of its container, and that one's log", async () => {
    agent.writeManifest("crash.yaml", failingThenRunning("crash", 4));
    crash = await agent.waitPod(
      "crash",
      "running after 4 restarts",
      (p) => restarts(p) === 4 && isRunning(p),
      60_000,
    );
    await eventually("the dead instances to be collected", async () => {
      const c = await containersOf("crash");
      return c.dead === 1 && c.running === 1;
    });
    await Bun.sleep(1500); // three more passes change nothing
    expect(await containersOf("crash")).toMatchObject({ dead: 1, running: 1 });
    expect(logFiles(crash)).toEqual(["3.log", "4.log"]);
    const previous = agent.cli(["logs", `crash-${agent.nodeName}`, "--previous"]);
    expect(previous).toMatchObject({ code: 0, stdout: "run 4\n" });
  }, 90_000);

  test("an agent restart changes nothing: the same containers, the dead instance kept", async () => {
    const before = await containersOf("crash");
    await agent.stop();
    await agent.start();
    const pod = await agent.waitPod("crash", "Running", isRunning);
    expect(restarts(pod)).toBe(4);
    await Bun.sleep(1500);
    expect(await containersOf("crash")).toEqual(before);
    expect(logFiles(crash)).toEqual(["3.log", "4.log"]);
  }, 60_000);

  test("a pod deleted while the agent is down leaves no container, sandbox, log or pod folder", async () => {
    await agent.stop();
    agent.removeManifest("crash.yaml");
    await agent.start();
    const uid = crash.metadata.uid ?? "";
    await eventually(
      "the deleted pod's containers and sandboxes to be removed",
      async () => {
        const filter = { labelSelector: { "io.kubernetes.pod.uid": uid } };
        const [cs, sbs] = await Promise.all([
          cri.listContainers({ filter }),
          cri.listPodSandbox({ filter }),
        ]);
        return cs.containers.length === 0 && sbs.items.length === 0;
      },
      30_000,
    );
    await eventually("its log folder to be removed", () => logFiles(crash) === undefined);
    await eventually(
      "its pod folder to be removed",
      () => !existsSync(join(agent.rootDir, "pods", uid)),
    );
  }, 60_000);

  test("over maximumDeadContainers the oldest dead instance goes, whichever pod it is in", async () => {
    for (const name of ["g1", "g2", "g3"]) {
      agent.writeManifest(`${name}.yaml`, failingThenRunning(name, 1));
      await agent.waitPod(
        name,
        "running after a restart",
        (p) => restarts(p) === 1 && isRunning(p),
      );
    }
    // Three dead containers, one per pod, over the limit of 2: g1's, the oldest, goes.
    await eventually("g1's dead instance to be collected", async () => {
      return (await containersOf("g1")).dead === 0;
    });
    await Bun.sleep(1500);
    const dead = await Promise.all(
      ["g1", "g2", "g3"].map(async (n) => (await containersOf(n)).dead),
    );
    expect(dead).toEqual([0, 1, 1]);
  }, 90_000);
});
