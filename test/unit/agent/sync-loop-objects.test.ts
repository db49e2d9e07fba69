import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPodManager } from "../../../src/agent/podmanager/index.ts";
import { createPodConfig } from "../../../src/agent/sources/index.ts";
import {
  createSyncLoop,
  createWorkQueue,
  type SyncLoopDeps,
} from "../../../src/agent/syncloop/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

function setup() {
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-syncloop-"));
  const updates: string[] = [];
  const removed: string[] = [];
  const podConfig = createPodConfig({ sources: ["file"], clock, onError: () => {} });
  const deps = {
    clock,
    logger: nullLogger,
    podManager: createPodManager(),
    workQueue: createWorkQueue(clock),
    updatePod: (u: { pod: { metadata: { name: string } }; type: string }) =>
      updates.push(`${u.type} ${u.pod.metadata.name}`),
    workerState: () => "syncing",
    syncKnownPods: () => new Map(),
    couldHaveRunningContainers: () => false,
    seenAllSources: () => podConfig.seenAllSources(),
    runtimePods: async () => [],
    statusUids: () => [],
    admitHandlers: { beforeCount: [], afterCount: [] },
    rootDir: dir,
    maxPods: 110,
    runtimeHealthy: () => true,
    forgetCache: () => {},
    housekeepingIntervalMs: 1000,
    removePodDir: async (uid: string) => removed.push(uid),
  } as unknown as SyncLoopDeps;
  const loop = createSyncLoop(deps);
  return { loop, podConfig, updates, removed, dir, done: () => rmSync(dir, { recursive: true }) };
}

describe("sync loop and objects", () => {
  test("a changed ConfigMap or Secret syncs exactly the pods that read it", () => {
    const s = setup();
    const reader = makePod({
      name: "reader",
      spec: { containers: [], volumes: [{ name: "c", configMap: { name: "cfg" } }] },
    });
    const env = makePod({
      name: "env",
      containers: [makeContainer({ envFrom: [{ secretRef: { name: "creds" } }] })],
    });
    const other = makePod({ name: "other" });
    s.loop.handleConfigUpdate({ op: "ADD", source: "file", pods: [reader, env, other] });
    s.updates.length = 0;
    s.loop.handleObjectsChanged(new Set(["ConfigMap/default/cfg"]));
    s.loop.handleObjectsChanged(new Set(["Secret/default/creds", "ConfigMap/other/cfg"]));
    expect(s.updates).toEqual(["sync reader", "sync env"]);
    s.done();
  });

  test("housekeeping removes an orphaned pod folder through the volume manager", async () => {
    const s = setup();
    mkdirSync(join(s.dir, "pods", "gone-uid"), { recursive: true });
    s.podConfig.set("file", []);
    await s.loop.housekeeping();
    expect(s.removed).toEqual(["gone-uid"]);
    s.done();
  });
});
