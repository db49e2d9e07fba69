import { describe, expect, test } from "bun:test";
import { createPodManager } from "../../../src/agent/podmanager/index.ts";
import type { WorkerState } from "../../../src/agent/podworkers/index.ts";
import type { PodUpdate as ConfigUpdate } from "../../../src/agent/sources/index.ts";
import type { SyncLoopDeps } from "../../../src/agent/syncloop/index.ts";
import { createSyncLoop, createWorkQueue } from "../../../src/agent/syncloop/index.ts";
import type { Pod } from "../../../src/api/types.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { createLogger, nullLogger } from "../../../src/util/log.ts";
import { makePod } from "../../lib/builders.ts";

/** A sync loop whose inputs never deliver anything, but whose PLEG input fails once. */
function loopWithFailingPLEG(logs: string[], clock: FakeClock) {
  let failures = 0;
  const never = (signal: AbortSignal) =>
    new Promise<never>((_, reject) =>
      signal.addEventListener("abort", () => reject(signal.reason), { once: true }),
    );
  const deps = {
    clock,
    logger: createLogger({ write: (line) => logs.push(line) }),
    nextConfigUpdate: never,
    nextPLEGEvent: (signal: AbortSignal) =>
      failures++ === 0 ? Promise.reject(new Error("event stream broke")) : never(signal),
    housekeepingIntervalMs: 60_000,
    syncTickMs: 60_000,
  } as unknown as SyncLoopDeps;
  return { loop: createSyncLoop(deps), failures: () => failures };
}

describe("sync loop run()", () => {
  test("logs a failing input with what failed, pauses a second, and reads it again", async () => {
    const logs: string[] = [];
    const clock = new FakeClock();
    const { loop, failures } = loopWithFailingPLEG(logs, clock);
    const abort = new AbortController();
    const running = loop.run(abort.signal);
    await Bun.sleep(0);
    expect(failures()).toBe(1);
    expect(logs).toHaveLength(1);
    expect(logs[0]).toContain("reading the next PLEG event failed; trying again in 1 s");
    expect(logs[0]).toContain('error="event stream broke"');
    clock.step(999);
    await Bun.sleep(0);
    expect(failures()).toBe(1);
    clock.step(1);
    await Bun.sleep(0);
    expect(failures()).toBe(2);
    abort.abort();
    await running;
    expect(logs).toHaveLength(1);
  });
});

/** A sync loop over recording fakes: workers, statuses, admission handlers and readmissions. */
function loopWith(o: {
  /** Deps replacing the fakes'. */
  deps?: Partial<Record<keyof SyncLoopDeps, unknown>>;
  maxPods?: number;
  pressure?: (pod: Pod) => { reason: string; message: string } | undefined;
  fits?: (pod: Pod) => boolean;
  due?: () => string[];
}) {
  const calls: string[] = [];
  const states = new Map<string, WorkerState>();
  const clock = new FakeClock();
  const podManager = createPodManager();
  const deps = {
    clock,
    logger: nullLogger,
    podManager,
    workQueue: createWorkQueue(clock),
    maxPods: o.maxPods ?? 110,
    rootDir: "/nonexistent",
    housekeepingIntervalMs: 1000,
    seenAllSources: () => true,
    runtimeHealthy: () => true,
    runtimePods: async () => [],
    updatePod: (u: { pod: Pod; type: string }) => {
      calls.push(`${u.type} ${u.pod.metadata.name}`);
      states.set(u.pod.metadata.uid as string, u.type === "kill" ? "terminated" : "syncing");
    },
    workerState: (uid: string) => states.get(uid),
    couldHaveRunningContainers: (uid: string) => states.get(uid) === "syncing",
    syncKnownPods: () => new Map(states),
    forgetWorker: (uid: string) => {
      calls.push(`forget ${uid}`);
      return states.delete(uid);
    },
    rejectPod: (pod: Pod, reason: string) => calls.push(`reject ${pod.metadata.name} ${reason}`),
    event: (pod: Pod, _type: string, reason: string) =>
      calls.push(`event ${pod.metadata.name} ${reason}`),
    statusUids: () => [],
    removeStatus: (uid: string) => calls.push(`removeStatus ${uid}`),
    forgetCache: () => {},
    removeOrphan: async () => {},
    admitHandlers: {
      beforeCount: [(pod: Pod) => o.pressure?.(pod)],
      afterCount: [
        (pod: Pod) =>
          o.fits?.(pod) === false ? { reason: "OutOfmemory", message: "no" } : undefined,
      ],
    },
    readmissions: {
      due: o.due ?? (() => []),
      forget: (uid: string) => calls.push(`readmitted ${uid}`),
    },
    ...o.deps,
  } as unknown as SyncLoopDeps;
  return { loop: createSyncLoop(deps), calls, states, podManager };
}

const add = (...pods: Pod[]) => ({ op: "ADD", pods, source: "file" }) as unknown as ConfigUpdate;

describe("sync loop housekeeping", () => {
  test("keeps the status of a pod rejected while it waited on the runtime's listing", async () => {
    let listed: (pods: []) => void = () => {};
    const statuses = new Set(["old"]);
    const { loop, calls } = loopWith({
      fits: () => false,
      deps: {
        runtimePods: () => new Promise((resolve) => (listed = resolve)),
        statusUids: () => [...statuses],
      },
    });
    const cleaning = loop.housekeeping();
    loop.handleConfigUpdate(add(makePod({ name: "hog", uid: "hog1" })));
    statuses.add("hog1"); // its Failed status, published by the rejection
    listed([]);
    await cleaning;
    expect(calls).toEqual(["reject hog OutOfmemory", "event hog OutOfmemory", "removeStatus old"]);
  });
});

describe("sync loop housekeeping of runtime pods no source wants", () => {
  test("stops and removes those that may still run, and leaves dead ones to the container GC", async () => {
    const removed: string[] = [];
    const pod = (uid: string, sandbox: "ready" | "notready", container: string) => ({
      uid,
      name: uid,
      namespace: "default",
      sandboxes: [{ id: `sb-${uid}`, state: sandbox }],
      containers: [{ id: `c-${uid}`, name: "c", state: container }],
    });
    const { loop } = loopWith({
      deps: {
        runtimePods: async () => [
          pod("live", "ready", "running"),
          pod("unknown", "notready", "unknown"),
          pod("dead", "notready", "exited"),
        ],
        removeOrphan: async (rp: { uid: string }) => {
          removed.push(rp.uid);
        },
      },
    });
    await loop.housekeeping();
    expect(removed).toEqual(["live", "unknown"]);
  });
});

describe("sync loop admission", () => {
  test("admits in the kubelet's order: node pressure, then the pod count, then resources", () => {
    const pressured = makePod({ name: "a" });
    const { loop, calls } = loopWith({
      maxPods: 1,
      pressure: (p) => (p === pressured ? { reason: "Evicted", message: "pressure" } : undefined),
      fits: (p) => p.metadata.name !== "c",
    });
    loop.handleConfigUpdate(add(pressured, makePod({ name: "b" }), makePod({ name: "c" })));
    expect(calls).toEqual([
      "reject a Evicted",
      "event a Evicted",
      "create b",
      "reject c OutOfpods",
      "event c OutOfpods",
    ]);
  });

  test("housekeeping readmits a pod whose wait is over: a new instance through admission", async () => {
    let due: string[] = [];
    const victim = makePod({ name: "victim", uid: "v1" });
    const { loop, calls, states } = loopWith({ due: () => due });
    loop.handleConfigUpdate(add(victim));
    states.set("v1", "terminated"); // evicted and cleaned up
    await loop.housekeeping();
    expect(calls).toEqual(["create victim"]);
    due = ["v1"];
    await loop.housekeeping();
    expect(calls).toEqual([
      "create victim",
      "forget v1",
      "readmitted v1",
      "removeStatus v1",
      "event victim Readmitted",
      "create victim",
    ]);
  });

  test("a pod still stopping is readmitted at a later housekeeping, not before", async () => {
    const victim = makePod({ name: "victim", uid: "v1" });
    const { loop, calls } = loopWith({ due: () => ["v1"] });
    loop.handleConfigUpdate(add(victim)); // its worker is syncing: could have running containers
    await loop.housekeeping();
    expect(calls).toEqual(["create victim"]);
  });
});

describe("sync loop admission and restarts", () => {
  test("a pod refused at admission is in the pod manager when its Failed status is published", () => {
    const seen: boolean[] = [];
    const pod = makePod({ name: "hub" });
    const { loop, podManager } = loopWith({
      fits: () => false,
      deps: { rejectPod: (p: Pod) => seen.push(podManager.has(p.metadata.uid ?? "")) },
    });
    loop.handleConfigUpdate(add(pod));
    expect(seen).toEqual([true]);
  });

  test("housekeeping creates a desired pod whose worker was dropped to restart it", async () => {
    const pod = makePod({ name: "again", uid: "a1" });
    // Its worker terminated, then a sync of known pods dropped it (a restart was asked).
    const { loop, calls } = loopWith({ deps: { syncKnownPods: () => new Map() } });
    loop.handleConfigUpdate(add(pod));
    await loop.housekeeping();
    expect(calls).toEqual(["create again", "create again"]);
  });
});
