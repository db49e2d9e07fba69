// The cgroup drivers against a scratch directory standing in for the controller files, and the
// container manager over a recording fake driver. No root needed.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type CgroupManager,
  createCgroupV1,
  createCgroupV2,
  createContainerManager,
  createCpuManager,
  type ResourceConfig,
} from "../../../src/agent/cm/index.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

const scratch = mkdtempSync(join(tmpdir(), "fleetlet-cgroup-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
const read = (...p: string[]) => readFileSync(join(scratch, ...p), "utf8");

describe("cgroup v2 driver (scratch directory)", () => {
  const root = join(scratch, "v2");
  mkdirSync(root);
  writeFileSync(join(root, "cgroup.controllers"), "cpuset cpu io memory hugetlb pids rdma\n");
  const cg = createCgroupV2({ mountPoint: root });

  test("enables controllers down the path and writes weight, cpu.max, memory.max, pids.max", async () => {
    await cg.create("/kubepods/burstable/pod1", {
      cpuShares: 1024,
      cpuQuota: 50_000,
      cpuPeriod: 100_000,
      memory: 64 * 1024 * 1024,
      pidsLimit: 100,
    });
    expect(read("v2", "cgroup.subtree_control")).toBe("+cpuset +cpu +memory +pids");
    expect(read("v2", "kubepods", "burstable", "cgroup.subtree_control")).toBe(
      "+cpuset +cpu +memory +pids",
    );
    const pod = ["v2", "kubepods", "burstable", "pod1"];
    expect(read(...pod, "cpu.weight")).toBe("39");
    expect(read(...pod, "cpu.max")).toBe("50000 100000");
    expect(read(...pod, "memory.max")).toBe("67108864");
    expect(read(...pod, "pids.max")).toBe("100");
    expect(await cg.exists("/kubepods/burstable/pod1")).toBe(true);
    expect(await cg.children("/kubepods/burstable")).toEqual(["pod1"]);
  });

  test("unlimited values are written as max", async () => {
    await cg.update("/kubepods/burstable/pod1", { cpuQuota: 0, memory: -1, pidsLimit: -1 });
    const pod = ["v2", "kubepods", "burstable", "pod1"];
    expect(read(...pod, "cpu.max")).toBe("max 100000");
    expect(read(...pod, "memory.max")).toBe("max");
    expect(read(...pod, "pids.max")).toBe("max");
  });

  test("stats read memory.current, cpu.stat, pids.current and PSI", async () => {
    const dir = join(root, "kubepods", "burstable", "pod1");
    writeFileSync(join(dir, "memory.current"), "4096\n");
    writeFileSync(
      join(dir, "cpu.stat"),
      "usage_usec 10\nnr_periods 5\nnr_throttled 2\nthrottled_usec 7\n",
    );
    writeFileSync(join(dir, "pids.current"), "3\n");
    writeFileSync(join(dir, "memory.pressure"), "some avg10=2.50 avg60=0 avg300=0 total=1\n");
    expect(await cg.stats("/kubepods/burstable/pod1")).toEqual({
      memoryUsageBytes: 4096,
      cpuUsageNanos: 10_000,
      nrPeriods: 5,
      nrThrottled: 2,
      throttledNanos: 7000,
      pids: 3,
      pressure: { memory: 2.5 },
    });
  });

  test("names with .. are refused", async () => {
    await expect(cg.create("/kubepods/../../etc", {})).rejects.toThrow(
      'invalid cgroup name "/kubepods/../../etc"',
    );
  });
});

describe("cgroup v1 driver (scratch hierarchies)", () => {
  const mounts = new Map<string, string>();
  for (const c of ["cpu", "memory", "pids", "cpuset"]) {
    mkdirSync(join(scratch, "v1", c), { recursive: true });
    mounts.set(c, join(scratch, "v1", c));
  }
  mounts.set("cpuacct", join(scratch, "v1", "cpu"));
  writeFileSync(join(scratch, "v1", "cpuset", "cpuset.cpus"), "0-1\n");
  writeFileSync(join(scratch, "v1", "cpuset", "cpuset.mems"), "0\n");
  const cg = createCgroupV1({ controllers: mounts });

  test("writes cpu.shares, CFS quota/period, memory and pids limits, and copies the parent's cpuset", async () => {
    await cg.create("/kubepods/podA", {
      cpuShares: 512,
      cpuQuota: 50_000,
      cpuPeriod: 100_000,
      memory: 1024,
      pidsLimit: 64,
    });
    expect(read("v1", "cpu", "kubepods", "podA", "cpu.shares")).toBe("512");
    expect(read("v1", "cpu", "kubepods", "podA", "cpu.cfs_quota_us")).toBe("50000");
    expect(read("v1", "cpu", "kubepods", "podA", "cpu.cfs_period_us")).toBe("100000");
    expect(read("v1", "memory", "kubepods", "podA", "memory.limit_in_bytes")).toBe("1024");
    expect(read("v1", "pids", "kubepods", "podA", "pids.max")).toBe("64");
    expect(read("v1", "cpuset", "kubepods", "cpuset.cpus")).toBe("0-1");
    expect(read("v1", "cpuset", "kubepods", "podA", "cpuset.mems")).toBe("0");
    await cg.update("/kubepods/podA", { cpuQuota: 0, memory: 0, pidsLimit: 0 });
    expect(read("v1", "cpu", "kubepods", "podA", "cpu.cfs_quota_us")).toBe("-1");
    expect(read("v1", "memory", "kubepods", "podA", "memory.limit_in_bytes")).toBe("-1");
    expect(read("v1", "pids", "kubepods", "podA", "pids.max")).toBe("max");
  });

  test("a write that fails names the file and the value", async () => {
    mkdirSync(join(scratch, "v1", "memory", "kubepods", "podB", "memory.limit_in_bytes"), {
      recursive: true,
    });
    await expect(cg.update("/kubepods/podB", { memory: 5 })).rejects.toThrow(
      `Cannot write "5" to ${join(scratch, "v1", "memory", "kubepods", "podB", "memory.limit_in_bytes")}`,
    );
  });
});

/** Records calls; cgroups "exist" once created. */
function fakeCgroups(): CgroupManager & { calls: string[]; made: Map<string, ResourceConfig> } {
  const made = new Map<string, ResourceConfig>();
  const calls: string[] = [];
  const childrenOf = (name: string) =>
    [...made.keys()]
      .filter((k) => k.startsWith(`${name}/`) && !k.slice(name.length + 1).includes("/"))
      .map((k) => k.slice(name.length + 1));
  return {
    version: 1,
    calls,
    made,
    literalName: (n) => n,
    paths: (n) => [n],
    exists: async (n) => made.has(n),
    create: async (n, c) => {
      calls.push(`create ${n}`);
      made.set(n, { ...made.get(n), ...c });
    },
    update: async (n, c) => {
      if (!made.has(n)) throw new Error(`no cgroup ${n}`);
      calls.push(`update ${n} ${JSON.stringify(c)}`);
      made.set(n, { ...made.get(n), ...c });
    },
    stats: async () => ({}),
    pids: async () => [],
    kill: async (n) => {
      calls.push(`kill ${n}`);
    },
    destroy: async (n) => {
      calls.push(`destroy ${n}`);
      for (const k of [...made.keys()]) if (k === n || k.startsWith(`${n}/`)) made.delete(k);
    },
    children: async (n) => childrenOf(n),
  };
}

describe("container manager", () => {
  const Gi = 1024 ** 3;
  function setup() {
    const cgroups = fakeCgroups();
    const cpu = createCpuManager({
      policy: "none",
      topology: { cpus: [{ id: 0, core: 0, socket: 0 }] },
      reserved: [],
      stateFile: join(scratch, "cm-state"),
      logger: nullLogger,
    });
    const cm = createContainerManager(
      {
        podsRoot: "/r/kubepods",
        podPidsLimit: 50,
        allocatable: {
          capacity: { cpu: 2000, memory: 4 * Gi, ephemeralStorage: 0, pods: 110, pid: 4096 },
          systemReserved: { cpu: 500, memory: Gi, ephemeralStorage: 0, pid: 96 },
          kubeReserved: { cpu: 0, memory: 0, ephemeralStorage: 0 },
          evictionHard: {},
        },
      },
      { cgroups, cpu, logger: nullLogger },
    );
    return { cgroups, cm };
  }
  const burstable = (name: string, cpu: string) =>
    makePod({ name, containers: [makeContainer({ resources: { requests: { cpu } } })] });

  test("start() makes kubepods with allocatable-for-pods limits and both QoS cgroups", async () => {
    const { cgroups, cm } = setup();
    await cm.start();
    expect(cgroups.made.get("/r/kubepods")).toEqual({
      cpuShares: 1536,
      memory: 3 * Gi,
      pidsLimit: 4000,
    });
    expect(cgroups.made.get("/r/kubepods/burstable")).toEqual({ cpuShares: 2 });
    expect(cgroups.made.get("/r/kubepods/besteffort")).toEqual({ cpuShares: 2 });
  });

  test("ensurePodCgroup() raises the burstable shares, then creates the pod cgroup once", async () => {
    const { cgroups, cm } = setup();
    await cm.start();
    const p = burstable("a", "500m");
    expect(cm.admit(p, [])).toBe(undefined);
    await cm.ensurePodCgroup(p);
    await cm.ensurePodCgroup(p);
    expect(cgroups.made.get("/r/kubepods/burstable")).toEqual({ cpuShares: 512 });
    expect(cgroups.made.get("/r/kubepods/burstable/poduid-default-a")).toEqual({
      cpuShares: 512,
      pidsLimit: 50,
    });
    expect(
      cgroups.calls.filter((c) => c.includes("create /r/kubepods/burstable/pod")),
    ).toHaveLength(1);
    expect(cm.podCgroupParent(p)).toBe("/r/kubepods/burstable/poduid-default-a");
  });

  test("housekeeping() removes cgroups of gone pods but keeps possibly running ones", async () => {
    const { cgroups, cm } = setup();
    await cm.start();
    const [a, b, c] = [burstable("a", "100m"), burstable("b", "100m"), burstable("c", "100m")];
    for (const p of [a, b, c]) await cm.ensurePodCgroup(p);
    await cm.housekeeping([a], (uid) => uid === "uid-default-b");
    expect([...(await cm.listPodCgroups()).keys()].sort()).toEqual([
      "uid-default-a",
      "uid-default-b",
    ]);
    expect(cgroups.calls).toContain("kill /r/kubepods/burstable/poduid-default-c");
    expect(cgroups.made.get("/r/kubepods/burstable")).toEqual({ cpuShares: 102 });
  });

  test("a QoS cgroup that vanished is created again on the next update", async () => {
    const { cgroups, cm } = setup();
    await cm.start();
    await cgroups.destroy("/r/kubepods/besteffort");
    await cm.housekeeping([], () => false);
    expect(cgroups.made.get("/r/kubepods/besteffort")).toEqual({ cpuShares: 2 });
  });

  test("admit() rejects what does not fit in allocatable (1500m cpu, 3Gi memory)", () => {
    const { cm } = setup();
    expect(cm.allocatable()).toEqual({ cpu: 1500, memory: 3 * Gi, ephemeralStorage: 0, pods: 110 });
    expect(cm.admit(burstable("big", "2"), [])?.reason).toBe("OutOfcpu");
  });
});
