import { describe, expect, test } from "bun:test";
import {
  diskParts,
  isCriticalPod,
  podPriority,
  rankPods,
} from "../../../src/agent/eviction/rank.ts";
import type { PodUsage } from "../../../src/agent/eviction/usage.ts";
import type { Pod } from "../../../src/api/types.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

const Mi = 2 ** 20;

function pod(name: string, o: { priority?: number; memory?: string; storage?: string } = {}): Pod {
  const requests: Record<string, string> = {};
  if (o.memory) requests.memory = o.memory;
  if (o.storage) requests["ephemeral-storage"] = o.storage;
  return makePod({
    name,
    containers: [makeContainer({ resources: { requests } })],
    spec: o.priority === undefined ? {} : { priority: o.priority },
  });
}

const usage = (u: Partial<PodUsage>): PodUsage => ({ containers: [], volumes: new Map(), ...u });
const names = (pods: Pod[]) => pods.map((p) => p.metadata.name);

describe("rankPods()", () => {
  test("memory: over its request first, then lower priority, then more usage above the request", () => {
    const within = pod("within", { priority: -100, memory: "200Mi" });
    const lowOver = pod("low-over", { priority: -10 });
    const highBig = pod("high-big", { priority: 1000, memory: "10Mi" });
    const highSmall = pod("high-small", { priority: 1000 });
    const u = new Map([
      [within.metadata.uid, usage({ memory: 100 * Mi })],
      [lowOver.metadata.uid, usage({ memory: 5 * Mi })],
      [highBig.metadata.uid, usage({ memory: 500 * Mi })],
      [highSmall.metadata.uid, usage({ memory: 50 * Mi })],
    ]);
    const ranked = rankPods(
      "memory.available",
      [within, highSmall, lowOver, highBig],
      (p) => u.get(p.metadata.uid),
      false,
    );
    expect(names(ranked)).toEqual(["low-over", "high-big", "high-small", "within"]);
  });

  test("a pod with no figures ranks first", () => {
    const measured = pod("measured", { priority: -1000 });
    const unknown = pod("unknown", { priority: 1000 });
    const u = new Map([[measured.metadata.uid, usage({ memory: Mi })]]);
    expect(
      names(rankPods("memory.available", [measured, unknown], (p) => u.get(p.metadata.uid), false)),
    ).toEqual(["unknown", "measured"]);
  });

  test("PIDs: lower priority first, then more processes", () => {
    const a = pod("a", { priority: 10 });
    const b = pod("b");
    const c = pod("c");
    const u = new Map([
      [a.metadata.uid, usage({ processes: 900 })],
      [b.metadata.uid, usage({ processes: 3 })],
      [c.metadata.uid, usage({ processes: 40 })],
    ]);
    expect(
      names(rankPods("pid.available", [a, b, c], (p) => u.get(p.metadata.uid), false)),
    ).toEqual(["c", "b", "a"]);
  });

  test("disk: the parts the signal's filesystem holds, over the request first", () => {
    const logs = pod("logs");
    const layer = pod("layer");
    const volume = pod("volume", { storage: "1Gi" });
    const u = new Map([
      [
        logs.metadata.uid,
        usage({ containers: [{ name: "app", logs: { bytes: 30 * Mi, inodes: 3 } }] }),
      ],
      [
        layer.metadata.uid,
        usage({ containers: [{ name: "app", rootfs: { bytes: 80 * Mi, inodes: 10 } }] }),
      ],
      [
        volume.metadata.uid,
        usage({ volumes: new Map([["data", { bytes: 200 * Mi, inodes: 5000 }]]) }),
      ],
    ]);
    const of = (p: Pod) => u.get(p.metadata.uid);
    const all = [logs, layer, volume];
    // One filesystem: everything counts; "volume" is within its 1Gi request, so it comes last.
    expect(names(rankPods("nodefs.available", all, of, false))).toEqual([
      "layer",
      "logs",
      "volume",
    ]);
    // An image filesystem of its own: nodefs counts logs and volumes, imagefs writable layers
    // ("layer" uses 0 on nodefs, which is still more above its request than "volume").
    expect(names(rankPods("nodefs.available", all, of, true))).toEqual(["logs", "layer", "volume"]);
    expect(names(rankPods("imagefs.available", all, of, true))[0]).toBe("layer");
    // Inodes: nobody requests inodes, so any use is over; then the most inodes above the
    // ephemeral-storage request (a quirk kept from the kubelet: bytes taken off inodes), which
    // puts "volume" and its 1Gi request last.
    expect(names(rankPods("nodefs.inodesFree", all, of, false))).toEqual([
      "layer",
      "logs",
      "volume",
    ]);
  });

  test("diskParts() follows the kubelet's split between node and image filesystems", () => {
    expect(diskParts("imagefs.available", true)).toEqual({
      rootfs: true,
      logs: false,
      volumes: false,
    });
    expect(diskParts("nodefs.inodesFree", true)).toEqual({
      rootfs: false,
      logs: true,
      volumes: true,
    });
    expect(diskParts("nodefs.available", false)).toEqual({
      rootfs: true,
      logs: true,
      volumes: true,
    });
  });
});

describe("podPriority() and isCriticalPod()", () => {
  const cases: [string, Partial<Pod["spec"]>, number, boolean][] = [
    ["no priority", {}, 0, false],
    ["spec.priority", { priority: 500 }, 500, false],
    [
      "system-cluster-critical",
      { priorityClassName: "system-cluster-critical" },
      2_000_000_000,
      true,
    ],
    ["system-node-critical", { priorityClassName: "system-node-critical" }, 2_000_001_000, true],
    ["an unknown class", { priorityClassName: "gold" }, 0, false],
    [
      "spec.priority over its class",
      { priorityClassName: "system-node-critical", priority: 7 },
      7,
      false,
    ],
    ["a priority at the critical line", { priority: 2_000_000_000 }, 2_000_000_000, true],
  ];
  for (const [what, spec, priority, critical] of cases) {
    test(`${what}: ${priority}${critical ? ", critical" : ""}`, () => {
      const p = makePod({ spec });
      expect(podPriority(p)).toBe(priority);
      expect(isCriticalPod(p)).toBe(critical);
    });
  }
});
