import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nodeMemory, pids, podsMemory, workingSet } from "../../../src/agent/eviction/observe.ts";
import { collectPodUsage, diskUsage } from "../../../src/agent/eviction/pod-stats.ts";
import { createPsiReader, formatPsi, parsePsi } from "../../../src/agent/eviction/psi.ts";
import type { ContainerStats } from "../../../src/cri/index.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "fleetlet-observe-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function files(base: string, entries: Record<string, string>): string {
  for (const [name, text] of Object.entries(entries)) {
    mkdirSync(join(base, name, ".."), { recursive: true });
    writeFileSync(join(base, name), text);
  }
  return base;
}

const MEMINFO =
  "MemTotal:       8000000 kB\nMemFree:        2000000 kB\nInactive(file):  1000000 kB\n";

describe("node signals", () => {
  test("memory.available on cgroup v1: MemTotal minus the root's usage less its inactive file cache", () => {
    files(dir, {
      meminfo: MEMINFO,
      "memory/memory.usage_in_bytes": String(3 * 2 ** 30),
      "memory/memory.stat": `cache 5\ntotal_inactive_file ${2 ** 30}\n`,
    });
    const o = nodeMemory({ version: 1, dir: join(dir, "memory") }, join(dir, "meminfo"));
    expect(o).toEqual({ capacity: 8000000 * 1024, available: 8000000 * 1024 - 2 * 2 ** 30 });
  });

  test("memory.available on cgroup v2: MemTotal − MemFree as the root's usage (runc), less the root memory.stat's inactive_file (cadvisor)", () => {
    // The root cgroup's count of inactive file pages differs from /proc/meminfo's (pages not
    // charged to any cgroup): the root's memory.stat is what the kubelet subtracts.
    files(dir, { meminfo: MEMINFO, "cg/memory.stat": `anon 5\ninactive_file ${600000 * 1024}\n` });
    const o = nodeMemory({ version: 2, dir: join(dir, "cg") }, join(dir, "meminfo"));
    expect(o).toEqual({ capacity: 8000000 * 1024, available: (2000000 + 600000) * 1024 });
  });

  test("memory.available on cgroup v2 with no root memory.stat (older kernels), or with no memory controller: /proc/meminfo alone", () => {
    files(dir, { meminfo: MEMINFO });
    const want = { capacity: 8000000 * 1024, available: (2000000 + 1000000) * 1024 };
    expect(nodeMemory({ version: 2, dir: join(dir, "cg") }, join(dir, "meminfo"))).toEqual(want);
    expect(nodeMemory(undefined, join(dir, "meminfo"))).toEqual(want);
  });

  test("allocatableMemory.available: the pods' cgroup against its limit (v2 names)", () => {
    files(dir, { "memory.current": "300", "memory.stat": "anon 100\ninactive_file 100\n" });
    expect(workingSet({ version: 2, dir })).toBe(200);
    expect(podsMemory({ version: 2, dir }, 1000)).toEqual({ available: 800, capacity: 1000 });
  });

  test("a missing file is an error naming it", () => {
    expect(() => workingSet({ version: 1, dir: join(dir, "gone") })).toThrow(
      `cannot read ${join(dir, "gone", "memory.usage_in_bytes")}`,
    );
  });

  test("pid.available: the lower of pid_max and threads-max, minus every task", () => {
    files(dir, {
      "sys/kernel/pid_max": "32768\n",
      "sys/kernel/threads-max": "20000\n",
      loadavg: "0.10 0.20 0.30 2/512 4242\n",
    });
    expect(pids(dir)).toEqual({ available: 20000 - 512, capacity: 20000 });
  });
});

describe("node PSI", () => {
  const text =
    "some avg10=12.50 avg60=3.00 avg300=0.75 total=1234\nfull avg10=1.00 avg60=0.50 avg300=0.10 total=99\n";
  test("parsePsi() reads both lines; formatPsi() writes them for the node annotation", () => {
    const line = parsePsi(text);
    expect(line).toEqual({
      some: { avg10: 12.5, avg60: 3, avg300: 0.75 },
      full: { avg10: 1, avg60: 0.5, avg300: 0.1 },
    });
    expect(line && formatPsi(line)).toBe(
      "some avg10=12.50 avg60=3.00 avg300=0.75; full avg10=1.00 avg60=0.50 avg300=0.10",
    );
    expect(parsePsi("garbage")).toBeUndefined();
  });

  test("createPsiReader() reports a file it cannot read once, and again when it reads", () => {
    files(dir, { memory: text, cpu: "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n" });
    const reports: string[] = [];
    const read = createPsiReader(
      (r, e) => reports.push(`${r}:${e === undefined ? "ok" : "error"}`),
      dir,
    );
    expect(Object.keys(read())).toEqual(["memory", "cpu"]);
    read();
    expect(reports).toEqual(["io:error"]);
    files(dir, { io: text });
    expect(Object.keys(read())).toEqual(["memory", "cpu", "io"]);
    expect(reports).toEqual(["io:error", "io:ok"]);
  });
});

describe("pod usage", () => {
  test("diskUsage() counts allocated blocks and each inode once", () => {
    files(dir, { "a/x": "x".repeat(10_000), "a/b/y": "y" });
    const u = diskUsage(join(dir, "a"));
    expect(u.inodes).toBe(4); // a, a/x, a/b, a/b/y
    expect(u.bytes).toBeGreaterThanOrEqual(10_000);
    expect(diskUsage(join(dir, "missing"))).toEqual({ bytes: 0, inodes: 0 });
  });

  test("collectPodUsage() joins the pod cgroup, the runtime's container stats, logs and emptyDirs", async () => {
    const pod = makePod({
      name: "p",
      uid: "u1",
      containers: [makeContainer({ name: "main" })],
      spec: {
        volumes: [
          { name: "data", emptyDir: {} },
          { name: "ram", emptyDir: { medium: "Memory" } },
        ],
      },
    });
    const root = join(dir, "root");
    files(root, { "pods/u1/volumes/kubernetes.io~empty-dir/data/f": "z".repeat(5000) });
    const logs = join(dir, "logs");
    files(logs, { "default_p_u1/main/0.log": "line\n" });
    const cg = join(dir, "cg");
    files(cg, {
      "memory.usage_in_bytes": "1000",
      "memory.stat": "total_inactive_file 200\n",
      "pids.current": "7\n",
    });
    const stats: ContainerStats[] = [
      {
        attributes: {
          id: "c1",
          metadata: { name: "main", attempt: 0 },
          labels: { "io.kubernetes.pod.uid": "u1", "io.kubernetes.container.name": "main" },
          annotations: {},
        },
        cpu: null,
        memory: {
          timestamp: 0,
          workingSetBytes: { value: 700 },
          availableBytes: null,
          usageBytes: null,
          rssBytes: null,
          pageFaults: null,
          majorPageFaults: null,
          psi: null,
        },
        writableLayer: {
          timestamp: 0,
          fsId: null,
          usedBytes: { value: 4096 },
          inodesUsed: { value: 3 },
        },
        swap: null,
        io: null,
      },
    ];
    const usage = await collectPodUsage(
      [pod],
      {
        rootDir: root,
        podLogsDir: logs,
        podCgroup: () => ({ memory: { version: 1, dir: cg }, pids: cg }),
        listContainerStats: async () => stats,
      },
      { memory: true, processes: true, logs: true, volumes: true, containers: true },
    );
    const u = usage.get("u1");
    expect(u?.memory).toBe(800);
    expect(u?.processes).toBe(7);
    expect(u?.containers[0]?.memory).toBe(700);
    expect(u?.containers[0]?.rootfs).toEqual({ bytes: 4096, inodes: 3 });
    expect(u?.containers[0]?.logs?.inodes).toBe(2);
    expect([...(u?.volumes.keys() ?? [])]).toEqual(["data"]);
    expect(u?.volumes.get("data")?.bytes).toBeGreaterThanOrEqual(5000);
  });
});
