import { describe, expect, test } from "bun:test";
import {
  checkResourceFit,
  computeAllocatable,
  parseReservation,
  podCgroupName,
  podRequests,
  podResourceConfig,
  podsCgroupLimits,
  qosResourceConfigs,
  thresholdBytes,
} from "../../../src/agent/cm/index.ts";
import { AGENT_CONFIG_DEFAULTS } from "../../../src/agent/config/index.ts";
import { getPodQOS } from "../../../src/api/index.ts";
import type { ResourceRequirements } from "../../../src/api/types.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

const Mi = 1024 ** 2;
const Gi = 1024 ** 3;
const pod = (name: string, ...resources: ResourceRequirements[]) =>
  makePod({
    name,
    containers: resources.map((r, i) => makeContainer({ name: `c${i}`, resources: r })),
  });

const guaranteed = pod("g", { limits: { cpu: "500m", memory: "64Mi" } });
const burstableAll = pod("ba", {
  requests: { cpu: "250m" },
  limits: { cpu: "1", memory: "128Mi" },
});
const burstablePartial = pod(
  "bp",
  { requests: { cpu: "100m", memory: "32Mi" }, limits: { cpu: "200m" } },
  { requests: { cpu: "100m" } },
);
const bestEffort = pod("be", {});

describe("pod cgroups: QoS class, name and settings as kubelet", () => {
  const cases = [
    {
      name: "Guaranteed: shares, quota and memory limit, directly under kubepods",
      pod: guaranteed,
      qos: "Guaranteed",
      cgroup: "/kubepods/poduid-default-g",
      config: { cpuShares: 512, cpuQuota: 50_000, cpuPeriod: 100_000, memory: 64 * Mi },
    },
    {
      name: "Burstable with every limit: shares of the request, quota and memory of the limits",
      pod: burstableAll,
      qos: "Burstable",
      cgroup: "/kubepods/burstable/poduid-default-ba",
      config: { cpuShares: 256, cpuQuota: 100_000, cpuPeriod: 100_000, memory: 128 * Mi },
    },
    {
      name: "Burstable with a container lacking limits: shares only",
      pod: burstablePartial,
      qos: "Burstable",
      cgroup: "/kubepods/burstable/poduid-default-bp",
      config: { cpuShares: 204 },
    },
    {
      name: "BestEffort: the minimum shares",
      pod: bestEffort,
      qos: "BestEffort",
      cgroup: "/kubepods/besteffort/poduid-default-be",
      config: { cpuShares: 2 },
    },
  ];
  for (const c of cases) {
    test(c.name, () => {
      expect(getPodQOS(c.pod)).toBe(c.qos as never);
      expect(podCgroupName("/kubepods", c.pod)).toBe(c.cgroup);
      expect(podResourceConfig(c.pod, { podPidsLimit: -1 })).toEqual(c.config);
    });
  }

  test("podPidsLimit is set on every pod cgroup", () => {
    expect(podResourceConfig(bestEffort, { podPidsLimit: 64 })).toEqual({
      cpuShares: 2,
      pidsLimit: 64,
    });
  });

  test("pod requests are the larger of the app containers' sum and the largest init container", () => {
    const p = makePod({
      containers: [
        makeContainer({ name: "a", resources: { requests: { cpu: "100m", memory: "10Mi" } } }),
        makeContainer({ name: "b", resources: { requests: { cpu: "100m", memory: "10Mi" } } }),
      ],
      initContainers: [
        makeContainer({ name: "i", resources: { requests: { cpu: "500m", memory: "1Mi" } } }),
      ],
    });
    expect(podRequests(p)).toEqual({ cpu: 500, memory: 20 * Mi, ephemeralStorage: 0 });
  });

  test("QoS cgroups: burstable shares sum the Burstable requests, besteffort the minimum", () => {
    expect(qosResourceConfigs([guaranteed, burstableAll, burstablePartial, bestEffort])).toEqual({
      burstable: { cpuShares: 460 },
      besteffort: { cpuShares: 2 },
    });
    expect(qosResourceConfigs([]).burstable).toEqual({ cpuShares: 2 });
  });
});

describe("node allocatable", () => {
  const capacity = { cpu: 2000, memory: 4 * Gi, ephemeralStorage: 100 * Gi, pods: 110 };

  test("subtracts the reservations and the hard eviction thresholds", () => {
    const got = computeAllocatable({
      capacity,
      systemReserved: { cpu: 250, memory: 256 * Mi, ephemeralStorage: Gi },
      kubeReserved: { cpu: 250, memory: 256 * Mi, ephemeralStorage: 0 },
      evictionHard: AGENT_CONFIG_DEFAULTS.evictionHard,
    });
    expect(got).toEqual({
      cpu: 1500,
      memory: 4 * Gi - 512 * Mi - 100 * Mi,
      // 10% is the 32-bit float 0.100000001…, as the kubelet parses it: 160 bytes over 10 Gi.
      ephemeralStorage: 100 * Gi - Gi - (10 * Gi + 160),
      pods: 110,
    });
  });

  test("never goes below zero", () => {
    const got = computeAllocatable({
      capacity,
      systemReserved: { cpu: 3000, memory: 8 * Gi, ephemeralStorage: 0 },
      kubeReserved: { cpu: 0, memory: 0, ephemeralStorage: 0 },
      evictionHard: {},
    });
    expect([got.cpu, got.memory]).toEqual([0, 0]);
  });

  test("pid reservations limit the pods' processes: pids = the node's PID count less both", () => {
    const sys = parseReservation({ cpu: "500m", pid: "1k" }, "systemReserved");
    const kube = parseReservation({ pid: "200" }, "kubeReserved");
    expect(sys).toEqual({ cpu: 500, memory: 0, ephemeralStorage: 0, pid: 1000 });
    const input = { capacity, systemReserved: sys, kubeReserved: kube, evictionHard: {} };
    expect(podsCgroupLimits({ ...input, capacity: { ...capacity, pid: 32768 } })).toEqual({
      cpuMilli: 1500,
      memory: 4 * Gi,
      pids: 32768 - 1200,
    });
    // A node whose PID count could not be read gets no pids limit on kubepods.
    expect(podsCgroupLimits(input).pids).toBe(undefined);
    expect(() => parseReservation({ pid: "many" }, "kubeReserved")).toThrow(
      'kubeReserved.pid: "many" is not a quantity',
    );
  });

  test("thresholds are quantities or percentages of capacity; others are errors naming the signal", () => {
    expect(thresholdBytes("memory.available", "100Mi", Gi)).toBe(100 * Mi);
    expect(thresholdBytes("nodefs.available", "10%", 1000)).toBe(100);
    expect(thresholdBytes("nodefs.available", "0%", 1000)).toBe(0);
    expect(() => thresholdBytes("memory.available", "lots", Gi)).toThrow(
      'evictionHard.memory.available: "lots" is not a quantity',
    );
  });
});

describe("checkResourceFit()", () => {
  const allocatable = { cpu: 1000, memory: 512 * Mi, ephemeralStorage: 0, pods: 110 };
  const running = [pod("r1", { requests: { cpu: "600m", memory: "100Mi" } })];

  test("admits a pod that fits next to the running ones", () => {
    expect(checkResourceFit(pod("n", { requests: { cpu: "400m" } }), running, allocatable)).toBe(
      undefined,
    );
  });

  test("rejects with OutOfcpu and kubelet's message when cpu does not fit", () => {
    expect(checkResourceFit(pod("n", { requests: { cpu: "500m" } }), running, allocatable)).toEqual(
      {
        reason: "OutOfcpu",
        message: "Node didn't have enough resource: cpu, requested: 500, used: 600, capacity: 1000",
      },
    );
  });

  test("rejects with OutOfmemory when memory does not fit", () => {
    const big = pod("n", { requests: { memory: "500Mi" } });
    expect(checkResourceFit(big, running, allocatable)?.reason).toBe("OutOfmemory");
  });

  test("reports cpu first when both do not fit, and ignores resources not requested", () => {
    const both = pod("n", { requests: { cpu: "2", memory: "1Gi" } });
    expect(checkResourceFit(both, running, allocatable)?.reason).toBe("OutOfcpu");
    expect(checkResourceFit(bestEffort, running, { ...allocatable, cpu: 0 })).toBe(undefined);
  });
});
