import { describe, expect, test } from "bun:test";
import {
  createEvictionManager,
  type EvictionManagerDeps,
  type EvictRequest,
} from "../../../src/agent/eviction/manager.ts";
import type { PodUsage } from "../../../src/agent/eviction/usage.ts";
import type { Observation, Signal } from "../../../src/agent/evictionapi/signals.ts";
import {
  buildThresholds,
  type EvictionThresholdSettings,
} from "../../../src/agent/evictionapi/thresholds.ts";
import type { Pod } from "../../../src/api/types.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { createLogger } from "../../../src/util/log.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

const Mi = 2 ** 20;
const Gi = 2 ** 30;

interface Harness {
  clock: FakeClock;
  logs: string[];
  evicted: { pod: string; request: EvictRequest }[];
  events: string[];
  reclaimed: string[];
  /** The next observations, by signal; a string is a read error. */
  signals: Map<Signal, Observation | string>;
  usage: Map<string, PodUsage>;
  pods: Pod[];
  cleanedUp: Set<string>;
  deps: EvictionManagerDeps;
}

function harness(
  settings: Partial<EvictionThresholdSettings>,
  opts: { reclaim?: () => void } = {},
): Harness {
  const h: Harness = {
    clock: new FakeClock(),
    logs: [],
    evicted: [],
    events: [],
    reclaimed: [],
    signals: new Map(),
    usage: new Map(),
    pods: [],
    cleanedUp: new Set(),
    deps: undefined as unknown as EvictionManagerDeps,
  };
  h.deps = {
    clock: h.clock,
    logger: createLogger({ write: (line) => h.logs.push(line) }),
    thresholds: buildThresholds(
      {
        evictionHard: {},
        evictionSoft: {},
        evictionSoftGracePeriod: {},
        evictionMinimumReclaim: {},
        ...settings,
      },
      { podCgroups: false },
    ),
    pressureTransitionMs: 10_000,
    monitoringPeriodMs: 10_000,
    maxPodGracePeriodSeconds: 0,
    async observe(signals) {
      const observations = new Map<Signal, Observation>();
      const errors = new Map<Signal, string>();
      for (const s of signals) {
        const v = h.signals.get(s);
        if (typeof v === "string") errors.set(s, v);
        else if (v !== undefined) observations.set(s, v);
      }
      return { observations, errors };
    },
    dedicatedImageFs: async () => false,
    activePods: () => h.pods,
    podUsage: async (pods) =>
      new Map(
        pods.map((p) => [
          p.metadata.uid ?? "",
          h.usage.get(p.metadata.name) ?? { containers: [], volumes: new Map() },
        ]),
      ),
    evictPod: (pod, request) => h.evicted.push({ pod: pod.metadata.name, request }),
    podCleanedUp: (uid) => h.cleanedUp.has(uid),
    nodeEvent: (type, reason, message) => h.events.push(`${type} ${reason} ${message}`),
    reclaim: {
      containers: async () => {
        h.reclaimed.push("containers");
      },
      images: async () => {
        h.reclaimed.push("images");
        opts.reclaim?.();
      },
    },
  };
  return h;
}

const pod = (name: string, spec: Partial<Pod["spec"]> = {}, memory?: string) =>
  makePod({
    name,
    spec,
    containers: [
      makeContainer({ name: "main", resources: memory ? { requests: { memory } } : {} }),
    ],
  });
const mem = (n: number): PodUsage => ({
  memory: n,
  containers: [{ name: "main", memory: n }],
  volumes: new Map(),
});

describe("eviction manager synchronize()", () => {
  test("under memory pressure evicts exactly the first-ranked pod, with the kubelet's message and a 1 s grace", async () => {
    const h = harness({ evictionHard: { "memory.available": "1Gi" } });
    h.pods = [pod("low", { priority: -10 }), pod("mid"), pod("high", { priority: 100 })];
    h.usage.set("low", mem(600 * Mi));
    h.usage.set("mid", mem(900 * Mi));
    h.usage.set("high", mem(2 * Gi));
    h.signals.set("memory.available", { available: 512 * Mi, capacity: 8 * Gi });
    const m = createEvictionManager(h.deps);
    const evicted = await m.synchronize();
    expect(evicted.map((p) => p.metadata.name)).toEqual(["low"]);
    expect(h.evicted).toEqual([
      {
        pod: "low",
        request: {
          gracePeriodSeconds: 1,
          disruption: true,
          message:
            "The node was low on resource: memory. Threshold quantity: 1Gi, available: 512Mi. Container main was using 600Mi, request is 0, has larger consumption of memory. ",
        },
      },
    ]);
    expect(m.conditions()).toEqual(["MemoryPressure"]);
    expect(h.events).toEqual(["Warning EvictionThresholdMet Attempting to reclaim memory"]);
  });

  test("never evicts a critical pod, even the biggest user; says so when nothing else is left", async () => {
    const h = harness({ evictionHard: { "pid.available": "100" } });
    const critical = pod("crit", { priorityClassName: "system-node-critical" });
    h.pods = [critical];
    h.usage.set("crit", { processes: 5000, containers: [], volumes: new Map() });
    h.signals.set("pid.available", { available: 10, capacity: 32768 });
    const m = createEvictionManager(h.deps);
    expect(await m.synchronize()).toEqual([]);
    expect(h.evicted).toEqual([]);
    expect(h.logs.some((l) => l.includes("cannot evict a critical pod"))).toBe(true);
    expect(h.logs.some((l) => l.includes("unable to evict any pods from the node"))).toBe(true);
    h.pods = [critical, pod("small")];
    await m.synchronize();
    expect(h.evicted.map((e) => e.pod)).toEqual(["small"]);
  });

  test("disk pressure reclaims dead containers, then images, and evicts nobody when that was enough", async () => {
    const h = harness(
      { evictionHard: { "nodefs.available": "10%" } },
      {
        reclaim: () =>
          h.signals.set("nodefs.available", { available: 50 * Gi, capacity: 100 * Gi }),
      },
    );
    h.pods = [pod("a")];
    h.signals.set("nodefs.available", { available: 5 * Gi, capacity: 100 * Gi });
    const m = createEvictionManager(h.deps);
    expect(await m.synchronize()).toEqual([]);
    expect(h.reclaimed).toEqual(["containers", "images"]);
    expect(h.evicted).toEqual([]);
  });

  test("disk pressure that reclaim does not relieve evicts a pod", async () => {
    const h = harness({ evictionHard: { "nodefs.available": "10%" } });
    h.pods = [pod("a")];
    h.signals.set("nodefs.available", { available: 5 * Gi, capacity: 100 * Gi });
    const m = createEvictionManager(h.deps);
    expect((await m.synchronize()).map((p) => p.metadata.name)).toEqual(["a"]);
    expect(h.reclaimed).toEqual(["containers", "images"]);
  });

  test("a pod over its emptyDir sizeLimit is evicted with no node pressure at all", async () => {
    const h = harness({});
    const filler = makePod({
      name: "filler",
      spec: { volumes: [{ name: "data", emptyDir: { sizeLimit: "1Mi" } }] },
    });
    h.pods = [filler, pod("other")];
    h.usage.set("filler", {
      containers: [],
      volumes: new Map([["data", { bytes: 2 * Mi, inodes: 2 }]]),
    });
    const m = createEvictionManager(h.deps);
    expect((await m.synchronize()).map((p) => p.metadata.name)).toEqual(["filler"]);
    expect(h.evicted[0]?.request).toEqual({
      gracePeriodSeconds: 1,
      disruption: false,
      message: 'Usage of EmptyDir volume "data" exceeds the limit "1Mi". ',
    });
  });

  test("a signal that cannot be read is reported once and the others still act", async () => {
    const h = harness({ evictionHard: { "memory.available": "1Gi", "imagefs.available": "15%" } });
    h.signals.set("imagefs.available", "cannot statfs /nowhere: ENOENT");
    h.signals.set("memory.available", { available: 4 * Gi, capacity: 8 * Gi });
    const m = createEvictionManager(h.deps);
    await m.synchronize();
    await m.synchronize();
    const reported = h.logs.filter((l) => l.includes("cannot read an eviction signal"));
    expect(reported).toHaveLength(1);
    expect(reported[0]).toContain("signal=imagefs.available");
    h.signals.set("memory.available", { available: 100 * Mi, capacity: 8 * Gi });
    await m.synchronize();
    expect(m.conditions()).toEqual(["MemoryPressure"]);
  });

  test("a soft eviction gives the pod its own grace period, capped by evictionMaxPodGracePeriod", async () => {
    const h = harness({
      evictionSoft: { "memory.available": "1Gi" },
      evictionSoftGracePeriod: { "memory.available": 5000 },
    });
    h.pods = [pod("slow", { terminationGracePeriodSeconds: 60 })];
    h.signals.set("memory.available", { available: 512 * Mi, capacity: 8 * Gi });
    const m = createEvictionManager({ ...h.deps, maxPodGracePeriodSeconds: 20 });
    expect(await m.synchronize()).toEqual([]); // within the soft grace period
    expect(m.conditions()).toEqual(["MemoryPressure"]);
    h.clock.step(5000);
    await m.synchronize();
    expect(h.evicted[0]?.request.gracePeriodSeconds).toBe(20);
  });

  test("admission under pressure, and readmission once the condition has been clear for the transition period", async () => {
    const h = harness({ evictionHard: { "memory.available": "1Gi" } });
    const victim = pod("victim");
    h.pods = [victim];
    h.signals.set("memory.available", { available: 512 * Mi, capacity: 8 * Gi });
    const m = createEvictionManager(h.deps);
    await m.synchronize();
    expect(m.admit(pod("besteffort"))?.message).toBe("The node had condition: [MemoryPressure]. ");
    expect(m.admit(pod("burstable", {}, "10Mi"))).toBeUndefined();
    h.pods = [];
    h.signals.set("memory.available", { available: 4 * Gi, capacity: 8 * Gi });
    h.clock.step(9_999);
    await m.synchronize();
    expect(m.conditions()).toEqual(["MemoryPressure"]); // the transition period
    h.clock.step(1);
    await m.synchronize();
    expect(m.conditions()).toEqual([]);
    h.clock.step(9_999);
    expect(m.readmissionsDue()).toEqual([]);
    h.clock.step(1);
    expect(m.readmissionsDue().sort()).toEqual(
      [pod("besteffort").metadata.uid ?? "", victim.metadata.uid ?? ""].sort(),
    );
  });
});

describe("eviction manager run()", () => {
  test("after an eviction waits for the pod's cleanup (at most 30 s) before the next cycle", async () => {
    const h = harness({ evictionHard: { "memory.available": "1Gi" } });
    const victim = pod("victim");
    h.pods = [victim, pod("other")];
    h.usage.set("victim", mem(Gi));
    h.signals.set("memory.available", { available: 512 * Mi, capacity: 8 * Gi });
    const m = createEvictionManager(h.deps);
    const abort = new AbortController();
    const running = m.run(abort.signal);
    await Bun.sleep(0);
    expect(h.evicted.map((e) => e.pod)).toEqual(["victim"]);
    h.pods = h.pods.filter((p) => p !== victim);
    h.clock.step(3000); // polled three times: not cleaned up yet, no new cycle
    await Bun.sleep(0);
    expect(h.evicted).toHaveLength(1);
    h.cleanedUp.add(victim.metadata.uid ?? "");
    h.clock.step(1000);
    await Bun.sleep(0);
    await Bun.sleep(0);
    expect(h.evicted.map((e) => e.pod)).toEqual(["victim", "other"]);
    abort.abort();
    await running;
  });
});

describe("eviction manager and wall-clock steps", () => {
  test.each([
    ["forward", 86_400_000],
    ["back", -86_400_000],
  ])(
    "a wall step %s of a day neither ends a soft grace period early nor holds it",
    async (_d, step) => {
      const h = harness({
        evictionSoft: { "memory.available": "1Gi" },
        evictionSoftGracePeriod: { "memory.available": 5000 },
      });
      h.pods = [pod("p")];
      h.signals.set("memory.available", { available: 512 * Mi, capacity: 8 * Gi });
      const m = createEvictionManager(h.deps);
      await m.synchronize();
      h.clock.stepWall(step);
      h.clock.step(4_999);
      await m.synchronize();
      expect(h.evicted).toHaveLength(0);
      h.clock.step(1);
      await m.synchronize();
      expect(h.evicted).toHaveLength(1);
    },
  );

  test("a wall step back keeps the transition period: the condition clears after 10 s", async () => {
    const h = harness({ evictionHard: { "memory.available": "1Gi" } });
    h.signals.set("memory.available", { available: 512 * Mi, capacity: 8 * Gi });
    const m = createEvictionManager(h.deps);
    await m.synchronize();
    h.signals.set("memory.available", { available: 4 * Gi, capacity: 8 * Gi });
    h.clock.stepWall(-86_400_000);
    h.clock.step(10_000);
    await m.synchronize();
    expect(m.conditions()).toEqual([]);
  });
});
