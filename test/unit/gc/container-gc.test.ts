import { describe, expect, test } from "bun:test";
import { createContainerGC, type PodGCState } from "../../../src/agent/gc/index.ts";
import { nodeSelector } from "../../../src/agent/kuberuntime/index.ts";
import { createFakeRuntime, type FakeRuntime } from "../../../src/cri/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { until } from "../../lib/until.ts";

const NODE = "node1";
function setup(states: Record<string, PodGCState> = {}, sourcesReady = true) {
  const clock = new FakeClock();
  const cri = createFakeRuntime({ now: () => clock.now() });
  cri.images.add("busybox");
  const events: string[] = [];
  const removedLogs: string[] = [];
  const gc = createContainerGC({
    cri,
    clock,
    logger: nullLogger,
    nodeName: NODE,
    policy: { minAgeMs: 0, maxPerPodContainer: 1, maxContainers: -1 },
    periodMs: 60_000,
    createdGraceMs: 5000,
    sourcesReady: () => sourcesReady,
    podState: (uid) => states[uid] ?? "active",
    removeContainer: async (id) => {
      await cri.removeContainer({ containerId: id });
      removedLogs.push(id);
      return 100;
    },
    stopContainer: async (id) => {
      await cri.stopContainer({ containerId: id, timeout: 0 });
    },
    removeSandbox: async (id) => {
      await cri.stopPodSandbox({ podSandboxId: id });
      await cri.removePodSandbox({ podSandboxId: id });
    },
    nodeEvent: (reason, message) => events.push(`${reason}: ${message}`),
  });
  return { clock, cri, gc, events, removedLogs };
}

const labels = (uid: string, node = NODE) => ({
  ...nodeSelector(node),
  "io.kubernetes.pod.uid": uid,
  "io.kubernetes.pod.name": `pod-${uid}`,
  "io.kubernetes.pod.namespace": "default",
});

const sandboxConfig = (uid: string, attempt = 0, node = NODE) => ({
  metadata: { name: `pod-${uid}`, namespace: "default", uid, attempt },
  labels: labels(uid, node),
});

async function sandbox(cri: FakeRuntime, uid: string, attempt = 0, node = NODE): Promise<string> {
  const res = await cri.runPodSandbox({ config: sandboxConfig(uid, attempt, node) });
  return res.podSandboxId;
}

/** Creates, starts and (unless `running`) exits one instance of container `name`. */
async function instance(
  cri: FakeRuntime,
  clock: FakeClock,
  sb: string,
  uid: string,
  name: string,
  attempt: number,
  running = false,
): Promise<string> {
  const { containerId } = await cri.createContainer({
    podSandboxId: sb,
    sandboxConfig: sandboxConfig(uid),
    config: {
      metadata: { name, attempt },
      image: { image: "busybox" },
      labels: { ...labels(uid), "io.kubernetes.container.name": name },
    },
  });
  await cri.startContainer({ containerId });
  if (!running) cri.exitContainer(containerId, 1);
  clock.step(1000);
  return containerId;
}

const ids = async (cri: FakeRuntime) =>
  (await cri.listContainers({})).containers.map((c) => c.id).sort();

describe("createContainerGC() with the fake runtime", () => {
  test("garbageCollect() removes all but the newest dead instance, with its logs", async () => {
    const { cri, clock, gc, removedLogs } = setup();
    const sb = await sandbox(cri, "u1");
    const a0 = await instance(cri, clock, sb, "u1", "a", 0);
    const a1 = await instance(cri, clock, sb, "u1", "a", 1);
    const a2 = await instance(cri, clock, sb, "u1", "a", 2);
    const run = await instance(cri, clock, sb, "u1", "a", 3, true);
    expect(await gc.garbageCollect()).toEqual({ containers: 2, sandboxes: 0, logBytes: 200 });
    expect(removedLogs).toEqual([a0, a1]);
    expect(await ids(cri)).toEqual([a2, run].sort());
  });

  test("leaves other nodes' containers alone", async () => {
    const { cri, clock, gc } = setup();
    const other = await sandbox(cri, "u9", 0, "other-node");
    const { containerId } = await cri.createContainer({
      podSandboxId: other,
      sandboxConfig: sandboxConfig("u9", 0, "other-node"),
      config: {
        metadata: { name: "a", attempt: 0 },
        image: { image: "busybox" },
        labels: { ...labels("u9", "other-node"), "io.kubernetes.container.name": "a" },
      },
    });
    clock.step(1000);
    const freed = await gc.garbageCollect();
    expect(freed.containers).toBe(0);
    expect(await ids(cri)).toEqual([containerId]);
  });

  test("removes a gone pod's containers and then its sandboxes", async () => {
    const { cri, clock, gc } = setup({ gone: "gone" });
    const sb = await sandbox(cri, "gone");
    await instance(cri, clock, sb, "gone", "a", 0);
    await cri.stopPodSandbox({ podSandboxId: sb });
    expect(await gc.garbageCollect()).toEqual({ containers: 1, sandboxes: 1, logBytes: 100 });
    expect(cri.sandboxes.size).toBe(0);
  });

  test("keeps a sandbox whose container could not be removed, and tries again next pass", async () => {
    const { cri, clock, gc } = setup({ gone: "gone" });
    const sb = await sandbox(cri, "gone");
    const a0 = await instance(cri, clock, sb, "gone", "a", 0);
    await cri.stopPodSandbox({ podSandboxId: sb });
    cri.failNext("removeContainer", new Error("device busy"));
    expect(await gc.garbageCollect()).toEqual({ containers: 0, sandboxes: 0, logBytes: 0 });
    expect(await ids(cri)).toEqual([a0]);
    expect(cri.sandboxes.has(sb)).toBe(true);
    expect(await gc.garbageCollect()).toEqual({ containers: 1, sandboxes: 1, logBytes: 100 });
  });

  test("a sandbox that cannot be stopped is reported once, tried again after one period and then twice as long each time, and removed once it can be", async () => {
    const { cri, clock, gc, events } = setup({ gone: "gone" });
    const sb = await sandbox(cri, "gone");
    cri.killSandbox(sb);
    let broken = true;
    cri.setHook((method) => {
      if (method === "stopPodSandbox" && broken)
        throw new Error("failed to destroy network for sandbox: unexpected end of JSON input");
    });
    const attempts = () => cri.callsOf("stopPodSandbox").length;
    const passAt = async (ms: number) => {
      clock.step(ms);
      return gc.garbageCollect();
    };
    expect(await passAt(0)).toEqual({ containers: 0, sandboxes: 0, logBytes: 0 });
    expect(events).toEqual([
      `ContainerGCFailed: Cannot remove sandbox ${sb} of pod "default/pod-gone": failed to destroy network for sandbox: unexpected end of JSON input; trying again with a back-off (at most every 30 min)`,
    ]);
    // Waits 1, 2, then 4 periods between attempts; no further event.
    for (const [waitMs, want] of [
      [59_000, 1],
      [1000, 2],
      [119_000, 2],
      [1000, 3],
      [239_000, 3],
    ] as const) {
      await passAt(waitMs);
      expect(attempts()).toBe(want);
    }
    expect(events).toHaveLength(1);
    broken = false;
    expect((await passAt(1000)).sandboxes).toBe(1);
    expect(cri.sandboxes.size).toBe(0);
    expect(events).toHaveLength(1);
  });

  test("deleteAllUnusedContainers() removes every dead instance but keeps a finished pod's record", async () => {
    const { cri, clock, gc } = setup({ done: "finished" });
    const sb = await sandbox(cri, "u1");
    await instance(cri, clock, sb, "u1", "a", 0);
    await instance(cri, clock, sb, "u1", "a", 1);
    const running = await instance(cri, clock, sb, "u1", "a", 2, true);
    const done = await sandbox(cri, "done");
    await instance(cri, clock, done, "done", "job", 0);
    const last = await instance(cri, clock, done, "done", "job", 1);
    const freed = await gc.deleteAllUnusedContainers();
    expect(freed.containers).toBe(3);
    expect(await ids(cri)).toEqual([running, last].sort());
  });

  test("stops a container in unknown state before removing it", async () => {
    const { cri, clock, gc } = setup({ gone: "gone" });
    const sb = await sandbox(cri, "gone");
    const id = await instance(cri, clock, sb, "gone", "a", 0, true);
    const fake = cri.containers.get(id);
    if (fake) fake.state = "CONTAINER_UNKNOWN";
    await gc.garbageCollect();
    const methods = cri.calls.map((c) => c.method);
    expect(methods.indexOf("stopContainer")).toBeGreaterThan(-1);
    expect(methods.indexOf("stopContainer")).toBeLessThan(methods.indexOf("removeContainer"));
    expect(await ids(cri)).toEqual([]);
  });

  test("run() reports a pass that cannot list the runtime as ContainerGCFailed and goes on", async () => {
    const { cri, clock, gc, events } = setup();
    const sb = await sandbox(cri, "u1");
    await instance(cri, clock, sb, "u1", "a", 0);
    await instance(cri, clock, sb, "u1", "a", 1);
    cri.failNext("listContainers", new Error("runtime is down"));
    const ac = new AbortController();
    const loop = gc.run(ac.signal);
    clock.step(60_000);
    await until("a node event", () => events.length > 0);
    expect(events).toEqual(["ContainerGCFailed: runtime is down"]);
    expect((await ids(cri)).length).toBe(2);
    await until("the next wait", () => clock.pending > 0);
    clock.step(60_000);
    await until("the second pass", async () => (await ids(cri)).length === 1);
    expect((await ids(cri)).length).toBe(1);
    ac.abort();
    await loop;
  });
});
