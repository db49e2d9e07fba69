import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PodStatus } from "../../../src/agent/kubecontainer/types.ts";
import { createPodSync, type PodRuntime } from "../../../src/agent/podsync/index.ts";
import { createStatusManager } from "../../../src/agent/status/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { makePod } from "../../lib/builders.ts";

const pod = makePod({ name: "hog", uid: "u1" });
const message = "The node was low on resource: memory. ";
const eviction = {
  gracePeriodSeconds: 1,
  reason: "Evicted",
  message,
  evict: true,
  conditions: [
    {
      type: "DisruptionTarget" as const,
      status: "True" as const,
      reason: "TerminationByKubelet",
      message,
    },
  ],
};

function setup() {
  const clock = new FakeClock();
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-evict-sync-"));
  const calls: string[] = [];
  let running = true;
  const status = (): PodStatus => ({
    uid: "u1",
    name: "hog",
    namespace: "default",
    ips: [],
    sandboxes: [
      {
        id: "sb",
        state: running ? "ready" : "notready",
        createdAt: 0,
        attempt: 0,
        ips: [],
        hostNetwork: false,
      } as PodStatus["sandboxes"][number],
    ],
    containers: [
      {
        id: "c1",
        name: "app",
        state: running ? "running" : "exited",
        exitCode: running ? 0 : 137,
        reason: running ? "" : "Error",
        createdAt: 1,
        startedAt: 2,
        finishedAt: running ? 0 : 3,
        restartCount: 0,
      } as unknown as PodStatus["containers"][number],
    ],
    timestamp: clock.now(),
  });
  const runtime: PodRuntime = {
    getPods: async () => [],
    getPodStatus: async () => status(),
    getPodStatusAfter: async () => status(),
    syncPod: async () => ({
      waiting: new Map(),
      changes: { sandboxes: [], containers: [], removed: [] },
    }),
    killPod: async (_p, _r, grace) => {
      calls.push(`kill grace=${grace}`);
      running = false;
    },
    removePod: async () => {
      calls.push("remove");
    },
  };
  const statusManager = createStatusManager({ clock });
  const sync = createPodSync({
    runtime,
    statusManager,
    clock,
    logger: nullLogger,
    rootDir: dir,
    hostIP: () => "192.168.1.2",
    updateCache: () => {},
    isDesired: () => true,
  });
  mkdirSync(sync.podDir("u1"), { recursive: true });
  return {
    sync,
    statusManager,
    calls,
    dir,
    done: () => rmSync(dir, { recursive: true, force: true }),
  };
}

describe("createPodSync() evictions", () => {
  test("an evicted pod ends Failed, reason Evicted, with the message and a DisruptionTarget condition", async () => {
    const s = setup();
    await s.sync.syncTerminatingPod(pod, 1, eviction);
    const st = s.statusManager.getPodStatus("u1");
    expect(st?.phase).toBe("Failed");
    expect(st?.reason).toBe("Evicted");
    expect(st?.message).toBe(message);
    expect(st?.conditions?.find((c) => c.type === "DisruptionTarget")).toMatchObject({
      status: "True",
      reason: "TerminationByKubelet",
      message,
    });
    expect(st?.containerStatuses?.[0]?.state.terminated?.exitCode).toBe(137);
    expect(s.calls).toEqual(["kill grace=1"]);
    s.done();
  });

  test("an evicted pod's content is removed though its manifest is still there; its status stays", async () => {
    const s = setup();
    await s.sync.syncTerminatingPod(pod, 1, eviction);
    await s.sync.syncTerminatedPod(pod, eviction);
    expect(s.calls).toEqual(["kill grace=1", "remove"]);
    expect(existsSync(s.sync.podDir("u1"))).toBe(false);
    expect(s.statusManager.getPodStatus("u1")?.reason).toBe("Evicted");
    s.done();
  });

  test("a pod that finished on its own keeps its containers and folder while its manifest is there", async () => {
    const s = setup();
    await s.sync.syncTerminatingPod(pod, 30, {});
    await s.sync.syncTerminatedPod(pod, {});
    expect(s.calls).toEqual(["kill grace=30"]);
    expect(existsSync(s.sync.podDir("u1"))).toBe(true);
    expect(s.statusManager.getPodStatus("u1")?.reason).toBeUndefined();
    s.done();
  });
});
