import { describe, expect, test } from "bun:test";
import { localStorageViolation } from "../../../src/agent/eviction/local-storage.ts";
import { evictionMessage, goQuantity, specQuantity } from "../../../src/agent/eviction/message.ts";
import { INITIAL_STATE, planCycle } from "../../../src/agent/eviction/plan.ts";
import type { PodUsage } from "../../../src/agent/eviction/usage.ts";
import type { Observation, Signal } from "../../../src/agent/evictionapi/signals.ts";
import { buildThresholds } from "../../../src/agent/evictionapi/thresholds.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

const Mi = 2 ** 20;
const Gi = 2 ** 30;

describe("goQuantity() prints as the kubelet's resource.Quantity", () => {
  const cases: [number, "binary" | "decimal", string][] = [
    [100 * Mi, "binary", "100Mi"],
    [1536, "binary", "1536"],
    [3 * Gi, "binary", "3Gi"],
    [1000, "binary", "1k"], // below 1Ki a binary amount prints as a decimal one
    [512, "binary", "512"],
    [0, "binary", "0"],
    [5000, "decimal", "5k"],
    [1500, "decimal", "1500"],
    [2_000_000, "decimal", "2M"],
    [-4096, "binary", "-4Ki"],
  ];
  for (const [n, format, text] of cases) {
    test(`${n} (${format}) → ${text}`, () => expect(goQuantity(n, format)).toBe(text));
  }
  test("spec quantities keep their kind of suffix, in canonical form", () => {
    expect(specQuantity("64Mi")).toBe("64Mi");
    expect(specQuantity("1.5Gi")).toBe("1536Mi");
    expect(specQuantity("1000M")).toBe("1G");
    expect(specQuantity(undefined)).toBe("0");
  });
});

function planFor(
  hard: Record<string, string>,
  observations: [Signal, Observation][],
  stall?: string,
) {
  const thresholds = buildThresholds(
    {
      evictionHard: hard,
      evictionSoft: {},
      evictionSoftGracePeriod: {},
      evictionMinimumReclaim: {},
      ...(stall ? { evictionMemoryStall: stall } : {}),
    },
    { podCgroups: false },
  );
  const obs = new Map(observations);
  return {
    obs,
    plan: planCycle({
      thresholds,
      observations: obs,
      state: INITIAL_STATE,
      now: 0,
      pressureTransitionMs: 0,
    }),
  };
}

describe("evictionMessage()", () => {
  const pod = makePod({
    name: "hog",
    containers: [
      makeContainer({ name: "eater", resources: { requests: { memory: "64Mi" } } }),
      makeContainer({ name: "quiet" }),
    ],
  });

  test("memory: the threshold, what was available, and each container over its request", () => {
    const { obs, plan } = planFor({ "memory.available": "100Mi" }, [
      ["memory.available", { available: 50 * Mi, capacity: 8 * Gi }],
    ]);
    const usage: PodUsage = {
      memory: 300 * Mi,
      containers: [
        { name: "eater", memory: 300 * Mi },
        { name: "quiet", memory: 0 },
      ],
      volumes: new Map(),
    };
    expect(evictionMessage("memory", pod, usage, plan, obs)).toBe(
      "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container eater was using 300Mi, request is 64Mi, has larger consumption of memory. ",
    );
  });

  test("a percentage threshold prints the bytes it stands for", () => {
    const { obs, plan } = planFor({ "nodefs.available": "10%" }, [
      ["nodefs.available", { available: 1000 * Mi, capacity: 20 * Gi }],
    ]);
    const usage: PodUsage = {
      containers: [
        { name: "eater", rootfs: { bytes: Mi, inodes: 1 }, logs: { bytes: Mi, inodes: 1 } },
      ],
      volumes: new Map(),
    };
    expect(evictionMessage("ephemeral-storage", pod, usage, plan, obs)).toBe(
      "The node was low on resource: ephemeral-storage. Threshold quantity: 2147483680, available: 1000Mi. Container eater was using 2Mi, request is 0, has larger consumption of ephemeral-storage. ",
    );
  });

  test("PIDs name no container; without figures only the node's part is said", () => {
    const { obs, plan } = planFor({ "pid.available": "1000" }, [
      ["pid.available", { available: 200, capacity: 32768 }],
    ]);
    expect(evictionMessage("pids", pod, undefined, plan, obs)).toBe(
      "The node was low on resource: pids. Threshold quantity: 1k, available: 200. ",
    );
  });

  test("the memory stall threshold says the stall", () => {
    const { obs, plan } = planFor(
      {},
      [["memory.stall", { available: 31.456, capacity: 100 }]],
      "20%",
    );
    expect(evictionMessage("memory", pod, undefined, plan, obs)).toBe(
      "The node was low on resource: memory. Memory stall (PSI some avg10): 31.46%, threshold: 20%. ",
    );
  });
});

describe("localStorageViolation()", () => {
  const withLimits = makePod({
    name: "writer",
    containers: [
      makeContainer({ name: "a", resources: { limits: { "ephemeral-storage": "10Mi" } } }),
      makeContainer({ name: "b", resources: { limits: { "ephemeral-storage": "20Mi" } } }),
    ],
    spec: {
      volumes: [
        { name: "scratch", emptyDir: { sizeLimit: "5Mi" } },
        { name: "ram", emptyDir: { medium: "Memory", sizeLimit: "1Mi" } },
      ],
    },
  });
  const use = (o: { a?: number; b?: number; scratch?: number; aLogs?: number }): PodUsage => ({
    containers: [
      {
        name: "a",
        rootfs: { bytes: o.a ?? 0, inodes: 1 },
        logs: { bytes: o.aLogs ?? 0, inodes: 1 },
      },
      { name: "b", rootfs: { bytes: o.b ?? 0, inodes: 1 }, logs: { bytes: 0, inodes: 1 } },
    ],
    volumes: new Map([["scratch", { bytes: o.scratch ?? 0, inodes: 1 }]]),
  });

  test("an emptyDir over its sizeLimit, with the kubelet's message", () => {
    expect(localStorageViolation(withLimits, use({ scratch: 6 * Mi }), false)?.message).toBe(
      'Usage of EmptyDir volume "scratch" exceeds the limit "5Mi". ',
    );
  });

  test("the pod's total over the sum of its containers' limits", () => {
    expect(localStorageViolation(withLimits, use({ a: 2 * Mi, b: 29 * Mi }), false)?.message).toBe(
      "Pod ephemeral local storage usage exceeds the total limit of containers 30Mi. ",
    );
  });

  test("one container over its own limit while the pod is within the total", () => {
    expect(localStorageViolation(withLimits, use({ a: 11 * Mi }), false)?.message).toBe(
      'Container a exceeded its local ephemeral storage limit "10Mi". ',
    );
    // With an image filesystem of its own, only the container's logs count for its own limit.
    expect(localStorageViolation(withLimits, use({ a: 11 * Mi }), true)).toBeUndefined();
    expect(localStorageViolation(withLimits, use({ aLogs: 11 * Mi }), true)?.message).toBe(
      'Container a exceeded its local ephemeral storage limit "10Mi". ',
    );
  });

  test("within every limit: nothing", () => {
    expect(
      localStorageViolation(withLimits, use({ a: 9 * Mi, b: 19 * Mi, scratch: Mi }), false),
    ).toBeUndefined();
  });
});
