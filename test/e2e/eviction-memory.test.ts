// Memory pressure for real: the compiled agent, containerd, and pods that allocate memory until
// the node's memory.available (the root cgroup) or the pods' cgroup (allocatableMemory.available)
// crosses a threshold set relative to what this machine has at the test's start. Needs root and
// the test bed. Each agent's thresholds leave this 24 GiB machine with gigabytes to spare.
import { afterAll, describe, expect, test } from "bun:test";
import type { Node } from "../../src/api/node.ts";
import type { Pod } from "../../src/api/types.ts";
import { showOutputOnFailure, TestAgent } from "../lib/agent.ts";
import {
  conditionOf,
  containerIdOf,
  eventsOf,
  evictionArgs,
  Gi,
  holdMemory,
  holdsAllMemory,
  isEvicted,
  isEvictedAndStopped,
  isRunning,
  Mi,
  memoryAvailable,
  memoryTotal,
  nodeOf,
  podManifest,
} from "../lib/eviction.ts";
import { TestHub } from "../lib/hub.ts";
import { eventually } from "../lib/testbed.ts";

const agents: TestAgent[] = [];

/** Polls a node condition every 100 ms; stop() returns its distinct successive values. */
function watchCondition(agent: TestAgent, type: string): { stop(): (string | undefined)[] } {
  const seen: (string | undefined)[] = [];
  let on = true;
  void (async () => {
    while (on) {
      const v = await conditionOf(agent, type).catch(() => undefined);
      if (v !== undefined && seen.at(-1) !== v) seen.push(v);
      await Bun.sleep(100);
    }
  })();
  return {
    stop() {
      on = false;
      return seen;
    },
  };
}
/** Whether the agent logged `message` about its pod `name`. */
function logged(agent: TestAgent, message: string, name: string): boolean {
  const pod = `pod=default/${name}-${agent.nodeName}`;
  return agent.output.split("\n").some((l) => l.includes(` ${message} `) && l.includes(pod));
}

const hub = new TestHub(["--heartbeat-interval", "1s"]);
afterAll(async () => {
  for (const a of agents) await a.cleanup();
  await hub.cleanup();
}, 60_000);

async function startAgent(args: string[]): Promise<TestAgent> {
  const agent = new TestAgent({ args });
  agents.push(agent);
  await agent.start();
  return agent;
}

describe("memory pressure (needs root and the test bed)", () => {
  test("memory.available: exactly the low-priority pod using the memory is evicted; the others never restart", async () => {
    // The threshold sits 2.5 GiB below what is available now (other work on this machine moves
    // it by hundreds of MiB); the hog takes 3.5 GiB.
    const threshold = Math.floor((memoryAvailable() - 2.5 * Gi) / Mi);
    const agent = await startAgent([
      "--eviction-hard",
      `memory.available<${threshold}Mi`,
      ...evictionArgs("3s"),
    ]);
    agent.writeManifest("default.yaml", podManifest(agent, "default", { script: "sleep 3600" }));
    agent.writeManifest(
      "high.yaml",
      podManifest(agent, "high", { priority: 1000, script: "sleep 3600" }),
    );
    const before = new Map<string, string | undefined>();
    for (const name of ["default", "high"])
      before.set(name, containerIdOf(await agent.waitPod(name, "Running", isRunning)));
    expect(await conditionOf(agent, "MemoryPressure")).toBe("False");
    const pressure = watchCondition(agent, "MemoryPressure");
    agent.writeManifest(
      "low.yaml",
      podManifest(agent, "low", {
        priority: -10,
        script: holdMemory(3584),
        requests: { memory: "16Mi" },
        limits: { memory: "4Gi" },
      }),
    );
    const low = await agent.waitPod("low", "evicted", isEvictedAndStopped, 60_000);
    expect(low.status?.message).toMatch(
      new RegExp(
        `^The node was low on resource: memory\\. Threshold quantity: ${threshold}Mi, available: \\d+(Ki)?\\. Container main was using \\d+(Ki|Mi)?, request is 16Mi, has larger consumption of memory\\. $`,
      ),
    );
    expect(low.status?.conditions?.find((c) => c.type === "DisruptionTarget")).toMatchObject({
      status: "True",
      reason: "TerminationByKubelet",
      message: low.status?.message,
    });
    const events = await eventsOf(agent);
    expect(
      events.find((e) => e.reason === "Evicted" && e.involvedObject.name === low.metadata.name)
        ?.message,
    ).toBe(low.status?.message as string);
    expect(events.find((e) => e.reason === "EvictionThresholdMet")?.involvedObject).toMatchObject({
      kind: "Node",
      name: agent.nodeName,
    });
    expect(agent.cli(["get", "pods"]).stdout).toMatch(/low-\S+\s+0\/1\s+Evicted\s/);
    expect(agent.cli(["describe", "pod", low.metadata.name]).stdout).toContain(
      "Reason:       Evicted",
    );
    // MemoryPressure was True while the hog held its memory, and goes back to False once the
    // transition period has passed since the last time the threshold was met: in the first
    // cycle after the manager's wait for the evicted pod to be cleaned up.
    await eventually(
      "the evicted pod to be cleaned up",
      async () => logged(agent, "pod evicted and cleaned up", "low"),
      30_000,
    );
    await eventually(
      "MemoryPressure to be False again",
      async () => (await conditionOf(agent, "MemoryPressure")) === "False",
      20_000,
    );
    expect(pressure.stop().slice(0, 2)).toEqual(["False", "True"]);
    for (const name of ["default", "high"]) {
      const now = (await agent.pod(name)) as Pod;
      expect(isRunning(now)).toBe(true);
      expect(now.status?.containerStatuses?.[0]?.restartCount).toBe(0);
      expect(containerIdOf(now)).toBe(before.get(name));
    }
    for (const f of ["low.yaml", "default.yaml", "high.yaml"]) agent.removeManifest(f);
  }, 120_000);

  test(
    "the pods' cgroup: a critical pod is never evicted even as the biggest user; BestEffort is rejected under MemoryPressure; evicted pods come back only after the clear period; the hub sees it all",
    () =>
      showOutputOnFailure(agents, async () => {
        await hub.start();
        // Pods may use 1.5 GiB (the kubepods limit); the threshold is met past 1 GiB of use.
        const reserved = memoryTotal() - 1536 * Mi;
        const agent = await startAgent([
          "--system-reserved",
          `memory=${reserved}`,
          "--eviction-hard",
          "memory.available<512Mi",
          "--hub",
          hub.url,
          "--join-token",
          await hub.joinToken(),
          ...evictionArgs("2s"),
        ]);
        agent.writeManifest("victim.yaml", podManifest(agent, "victim", { script: "sleep 3600" }));
        const victim = await agent.waitPod("victim", "Running", isRunning);
        agent.writeManifest(
          "crit.yaml",
          podManifest(agent, "crit", {
            priorityClassName: "system-node-critical",
            script: holdMemory(1200),
          }),
        );
        const evicted = await agent.waitPod("victim", "evicted", isEvicted, 60_000);
        expect(evicted.status?.message).toStartWith(
          "The node was low on resource: memory. Threshold quantity: 512Mi, available: ",
        );
        expect(await conditionOf(agent, "MemoryPressure")).toBe("True");
        await eventually(
          "the manager to give up on the critical pod",
          async () => agent.output.includes("cannot evict a critical pod"),
          15_000,
        );
        expect(isRunning((await agent.pod("crit")) as Pod)).toBe(true);
        // The threshold is first met while the critical pod is still allocating, its usage swinging
        // across the threshold: the pressure the rest relies on (the burst pod's eviction) lasts
        // only once it holds all its memory.
        await eventually(
          "the critical pod to hold all its memory",
          async () => holdsAllMemory(agent, "crit"),
          60_000,
        );

        // Admission under MemoryPressure: BestEffort rejected, Burstable admitted (and, the pressure
        // going on, evicted again later: admission only keeps out what would add to it at once).
        agent.writeManifest("late.yaml", podManifest(agent, "late", { script: "sleep 3600" }));
        agent.writeManifest(
          "burst.yaml",
          podManifest(agent, "burst", { script: "sleep 3600", requests: { memory: "8Mi" } }),
        );
        const late = await agent.waitPod("late", "rejected", (p) => p.status?.phase === "Failed");
        expect(late.status?.reason).toBe("Evicted");
        expect(late.status?.message).toBe(
          "Pod was rejected: The node had condition: [MemoryPressure]. ",
        );
        await agent.waitPod("burst", "admitted", (p) => p.status?.containerStatuses !== undefined);
        // ... and evicted. After an eviction the manager observes nothing until the pod's worker is
        // done (or 30 s have passed): its conditions can change only after that.
        await eventually(
          "the evicted burst pod to be cleaned up",
          async () => logged(agent, "pod evicted and cleaned up", "burst"),
          60_000,
        );

        // The hub sees the pressure and the evicted pod.
        await eventually("the hub to see MemoryPressure", async () => {
          const res = await hub.api(`/api/v1/nodes/${agent.nodeName}`);
          const node = res.status === 200 ? ((await res.json()) as Node) : undefined;
          return (
            node?.status.conditions?.find((c) => c.type === "MemoryPressure")?.status === "True"
          );
        });
        const table = agent.cli(["get", "nodes", "--hub", hub.url, "--token", hub.operatorToken]);
        expect(table.stdout).toMatch(new RegExp(`${agent.nodeName}\\s+Ready,MemoryPressure\\s`));
        await eventually("the hub to see the evicted pod", async () => {
          const res = await hub.api(`/api/v1/pods?nodeName=${agent.nodeName}`);
          const pods = ((await res.json()) as { items: Pod[] }).items;
          return pods.some((p) => p.metadata.name === evicted.metadata.name && isEvicted(p));
        });

        // Pressure ends once the critical pod is stopped: the condition goes False after the
        // transition period, and the evicted and rejected pods are admitted again only once it has
        // been False for the transition period.
        agent.removeManifest("crit.yaml");
        await eventually(
          "the critical pod to be stopped",
          async () => logged(agent, "pod terminated", "crit"),
          60_000,
        );
        let clearedAt = 0;
        await eventually(
          "MemoryPressure to be False",
          async () => {
            const v = await agent.pod("victim");
            expect(v === undefined || isEvicted(v)).toBe(true);
            if ((await conditionOf(agent, "MemoryPressure")) !== "False") return false;
            clearedAt = Date.now();
            return true;
          },
          15_000,
          100,
        );
        const back = await agent.waitPod("victim", "admitted again", (p) => !isEvicted(p), 15_000);
        expect(Date.now() - clearedAt).toBeGreaterThanOrEqual(1500);
        expect(back.metadata.uid).toBe(victim.metadata.uid);
        const again = await agent.waitPod("victim", "Running again", isRunning);
        expect(again.status?.containerStatuses?.[0]?.restartCount).toBe(0);
        expect(containerIdOf(again)).not.toBe(containerIdOf(victim));
        await agent.waitPod("late", "admitted again", isRunning, 15_000);
        expect((await eventsOf(agent)).some((e) => e.reason === "Readmitted")).toBe(true);
        for (const f of ["victim.yaml", "late.yaml", "burst.yaml"]) agent.removeManifest(f);
      }),
    150_000,
  );

  test("evictionMemoryStall: a pod thrashing its page cache under a tight limit raises the node's memory PSI, which counts as memory pressure", async () => {
    const agent = await startAgent(["--eviction-memory-stall", "2%", ...evictionArgs("2s")]);
    const node = await nodeOf(agent);
    expect(node.metadata.annotations?.["fleetlet.io/psi-memory"]).toMatch(/^some avg10=\d+\.\d\d /);
    const metrics = await (await agent.request("/metrics")).text();
    expect(metrics).toMatch(
      /fleetlet_node_pressure_stall_ratio\{resource="memory",kind="some",window="10s"\} [\d.]+/,
    );
    // Re-reading a 48 MiB file it wrote, under a 32 MiB limit: every read refaults, and the
    // reader waits on memory (as the kernel's PSI counts it) most of the time.
    agent.writeManifest(
      "thrash.yaml",
      podManifest(agent, "thrash", {
        script:
          "dd if=/dev/urandom of=/tmp/f bs=1M count=48 2>/dev/null; while :; do cat /tmp/f > /dev/null; done",
        requests: { memory: "8Mi" },
        limits: { memory: "32Mi" },
      }),
    );
    const thrash = await agent.waitPod("thrash", "evicted", isEvictedAndStopped, 60_000);
    agent.removeManifest("thrash.yaml");
    expect(thrash.status?.message).toMatch(
      /^The node was low on resource: memory\. Memory stall \(PSI some avg10\): \d+\.\d\d%, threshold: 2%\. /,
    );
    expect((await eventsOf(agent)).some((e) => e.reason === "EvictionThresholdMet")).toBe(true);
  }, 90_000);
});
