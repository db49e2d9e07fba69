// A dead sandbox that containerd cannot stop, as a power cut leaves it (the CNI plugins' cached
// result of the sandbox's network is an empty file, so every StopPodSandbox fails): made here by
// emptying that file and killing the sandbox's pause process. The pod must come back in a new
// sandbox, go when its manifest goes, and the container GC must report the dead sandbox once,
// retry it with a back-off, and remove it (releasing its address) once it can. Needs root and the
// test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Pod } from "../../src/api/types.ts";
import { createCriClient } from "../../src/cri/index.ts";
import { TestAgent } from "../lib/agent.ts";
import { podNetworkShellManifest } from "../lib/manifests.ts";
import { eventually } from "../lib/testbed.ts";

const CNI_RESULTS = "/var/lib/cni/results";
const agent = new TestAgent({ args: ["--container-gc-period", "500ms"] });
const cri = createCriClient({ endpoint: agent.tb.endpoint });
/** The emptied cache file and its content, put back at the end whatever happens. */
let emptied: { path: string; text: string } | undefined;

beforeAll(() => agent.start(), 30_000);
afterAll(async () => {
  if (emptied) writeFileSync(emptied.path, emptied.text);
  await agent.cleanup();
  cri.close();
}, 60_000);

async function sandboxesOf(pod: Pod) {
  const { items } = await cri.listPodSandbox({
    filter: { labelSelector: { "io.kubernetes.pod.uid": pod.metadata.uid ?? "" } },
  });
  return items;
}

const isRunning = (p: Pod) => p.status?.containerStatuses?.[0]?.state?.running !== undefined;

describe("a dead sandbox containerd cannot stop (needs root and the test bed)", () => {
  test("the pod comes back in a new sandbox and goes with its manifest; the GC reports the dead sandbox once, retries it with a back-off and removes it once it can be stopped", async () => {
    agent.writeManifest("net.yaml", podNetworkShellManifest("net", agent.tb.busybox, "sleep 3600"));
    const first = await agent.waitPod("net", "running", isRunning);
    const [old] = await sandboxesOf(first);
    const oldId = old?.id ?? "";
    const oldIp = first.status?.podIP ?? "";
    const cache = readdirSync(CNI_RESULTS).find((f) => f.includes(oldId) && f.endsWith("-eth0"));
    expect(cache).toBeDefined();
    const path = join(CNI_RESULTS, cache ?? "");
    emptied = { path, text: readFileSync(path, "utf8") };
    writeFileSync(path, "");
    const kill = Bun.spawnSync(
      [
        "ctr",
        "--address",
        agent.tb.socket,
        "-n",
        "k8s.io",
        "tasks",
        "kill",
        "-s",
        "SIGKILL",
        oldId,
      ],
      { stderr: "pipe" },
    );
    expect(kill.stderr.toString()).toBe("");

    // The pod runs again in a new sandbox; the dead one could not be stopped and is left.
    const again = await agent.waitPod("net", "running again", (p) => {
      const c = p.status?.containerStatuses?.[0];
      return isRunning(p) && (c?.restartCount ?? 0) >= 1;
    });
    const failedKill = (await agent.events()).find((e) => e.reason === "FailedKillPod");
    expect(failedKill?.message).toContain(`Cannot stop sandbox ${oldId} of pod "net-`);
    expect(failedKill?.message).toContain("unexpected end of JSON input");

    // Its manifest goes: so does the pod, the dead sandbox notwithstanding.
    agent.removeManifest("net.yaml");
    await eventually("the pod to be gone", async () => (await agent.pod("net")) === undefined);
    expect(agent.output).not.toContain("pod sync failed");
    const leftover = await sandboxesOf(again);
    expect(leftover.map((s) => s.id)).toEqual([oldId]);

    // The GC reports it once, and tries it again with a back-off (0.5 s, 1 s, 2 s...).
    const gcEvents = async () =>
      (await agent.events()).filter(
        (e) => e.reason === "ContainerGCFailed" && e.message.includes(oldId),
      );
    await eventually("the GC to report the sandbox", async () => (await gcEvents()).length > 0);
    await Bun.sleep(4000);
    const reported = await gcEvents();
    expect(reported).toHaveLength(1);
    expect(reported[0]?.count ?? 1).toBe(1);
    expect(reported[0]?.message).toMatch(
      new RegExp(
        `^Cannot remove sandbox ${oldId} of pod "default/net-\\S+": .*unexpected end of JSON input; trying again with a back-off \\(at most every 15 s\\)$`,
      ),
    );
    expect(agent.output.split("cannot remove a sandbox; retrying with a back-off")).toHaveLength(2);

    // The cache is readable again (what a fix of the device would do): the sandbox goes, and
    // its address is released.
    writeFileSync(path, emptied.text);
    emptied = undefined;
    await eventually(
      "the dead sandbox to be removed",
      async () => (await sandboxesOf(again)).length === 0,
      30_000,
      250,
    );
    expect(agent.output).toContain("removed a sandbox that could not be removed before");
    expect(existsSync(join(agent.tb.dir, "cni/data/fleetlet-testbed", oldIp))).toBe(false);
  }, 90_000);
});
