import { describe, expect, test } from "bun:test";
import { createPodWorkers, type PodWorkersDeps } from "../../../src/agent/podworkers/index.ts";
import type { Pod } from "../../../src/api/types.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { makePod } from "../../lib/builders.ts";
import { until } from "../../lib/until.ts";

interface Harness {
  log: string[];
  requeued: [string, number][];
  /** From now on, sync and terminate calls wait until release(). */
  hold: () => void;
  release: () => void;
  deps: PodWorkersDeps;
}

/** Records every call; syncPod blocks while `hold` is set so tests can queue updates meanwhile. */
function harness(opts: { terminal?: (pod: Pod) => boolean; failSync?: number } = {}): Harness {
  const log: string[] = [];
  const requeued: [string, number][] = [];
  let gate: Promise<void> | undefined;
  let open: (() => void) | undefined;
  let failures = opts.failSync ?? 0;
  const h: Harness = {
    log,
    requeued,
    hold: () => {
      gate = new Promise((r) => {
        open = r;
      });
    },
    release: () => {
      open?.();
      gate = undefined;
    },
    deps: {
      clock: new FakeClock(),
      logger: nullLogger,
      resyncIntervalMs: 60_000,
      errorBackoffMs: 1000,
      requeue: (uid, ms) => requeued.push([uid, ms]),
      async syncPod(pod, type) {
        log.push(
          `sync ${pod.metadata.name} ${pod.metadata.uid} ${type} ${pod.metadata.labels?.v ?? ""}`,
        );
        if (gate) await gate;
        if (failures > 0) {
          failures--;
          throw new Error("boom");
        }
        return { terminal: opts.terminal?.(pod) ?? false };
      },
      async syncTerminatingPod(pod, grace) {
        log.push(`terminating ${pod.metadata.uid} grace=${grace}`);
        if (gate) await gate;
      },
      async syncTerminatedPod(pod) {
        log.push(`terminated ${pod.metadata.uid}`);
      },
    },
  };
  return h;
}

describe("createPodWorkers()", () => {
  test("syncs a new pod and requeues it for the resync interval", async () => {
    const h = harness();
    const w = createPodWorkers(h.deps);
    w.updatePod({ pod: makePod({ name: "a", uid: "u1" }), type: "create" });
    await w.idle();
    expect(h.log).toEqual(["sync a u1 create "]);
    expect(h.requeued).toEqual([["u1", 60_000]]);
    expect(w.state("u1")).toBe("syncing");
  });

  test("merges updates that arrive during a sync into one pending update, newest pod first", async () => {
    const h = harness();
    const w = createPodWorkers(h.deps);
    h.hold();
    w.updatePod({ pod: makePod({ name: "a", uid: "u1", labels: { v: "1" } }), type: "create" });
    w.updatePod({ pod: makePod({ name: "a", uid: "u1", labels: { v: "2" } }), type: "update" });
    w.updatePod({ pod: makePod({ name: "a", uid: "u1", labels: { v: "3" } }), type: "sync" });
    h.release();
    await w.idle();
    expect(h.log).toEqual(["sync a u1 create 1", "sync a u1 sync 3"]);
  });

  test("a kill is never replaced by a later sync and the shorter grace period wins", async () => {
    const h = harness();
    const w = createPodWorkers(h.deps);
    h.hold();
    const pod = makePod({ name: "a", uid: "u1" });
    w.updatePod({ pod, type: "create" });
    w.updatePod({ pod, type: "kill", kill: { gracePeriodSeconds: 10 } });
    w.updatePod({ pod, type: "sync" });
    w.updatePod({ pod, type: "kill", kill: { gracePeriodSeconds: 20 } });
    expect(w.isTerminationRequested("u1")).toBe(true);
    h.release();
    await w.idle();
    expect(h.log).toEqual(["sync a u1 create ", "terminating u1 grace=10", "terminated u1"]);
    expect(w.state("u1")).toBe("terminated");
    expect(w.couldHaveRunningContainers("u1")).toBe(false);
  });

  for (const ending of ["returns", "throws"] as const) {
    test(`a kill cancels the sync in flight, and termination follows with no back-off (the sync ${ending})`, async () => {
      const h = harness();
      const signals: AbortSignal[] = [];
      const deps: PodWorkersDeps = {
        ...h.deps,
        async syncPod(pod, type, signal) {
          h.log.push(`sync ${pod.metadata.uid} ${type}`);
          if (signal) signals.push(signal);
          await new Promise<void>((resolve, reject) =>
            signal?.addEventListener("abort", () =>
              ending === "returns" ? resolve() : reject(signal.reason),
            ),
          );
          return { terminal: false };
        },
      };
      const w = createPodWorkers(deps);
      const pod = makePod({ name: "a", uid: "u1" });
      w.updatePod({ pod, type: "create" });
      await new Promise((r) => setTimeout(r, 0));
      expect(signals[0]?.aborted).toBe(false);
      w.updatePod({ pod, type: "kill", kill: { gracePeriodSeconds: 5 } });
      expect(signals[0]?.aborted).toBe(true);
      // The fake clock never moves: a back-off sleep here would never end.
      await w.idle();
      expect(h.log).toEqual(["sync u1 create", "terminating u1 grace=5", "terminated u1"]);
      expect(w.state("u1")).toBe("terminated");
    });
  }

  test("a pod whose sync reports terminal moves to terminating and terminated", async () => {
    const h = harness({ terminal: () => true });
    const w = createPodWorkers(h.deps);
    w.updatePod({ pod: makePod({ name: "job", uid: "j1" }), type: "create" });
    await w.idle();
    expect(h.log).toEqual(["sync job j1 create ", "terminating j1 grace=30", "terminated j1"]);
    w.updatePod({ pod: makePod({ name: "job", uid: "j1" }), type: "sync" });
    await w.idle();
    expect(h.log).toHaveLength(3);
  });

  test("a new UID of the same static pod starts only after the old one terminated", async () => {
    const h = harness();
    const w = createPodWorkers(h.deps);
    const old = makePod({ name: "web", uid: "old" });
    const next = makePod({ name: "web", uid: "new" });
    w.updatePod({ pod: old, type: "create" });
    await w.idle();
    h.hold();
    w.updatePod({ pod: old, type: "kill" });
    w.updatePod({ pod: next, type: "create" });
    await Bun.sleep(1);
    expect(h.log).toEqual(["sync web old create ", "terminating old grace=30"]);
    h.release();
    await w.idle();
    expect(h.log).toEqual([
      "sync web old create ",
      "terminating old grace=30",
      "terminated old",
      "sync web new create ",
    ]);
  });

  test("a failed sync is requeued after the error backoff", async () => {
    const h = harness({ failSync: 1 });
    const w = createPodWorkers(h.deps);
    w.updatePod({ pod: makePod({ name: "a", uid: "u1" }), type: "create" });
    await w.idle();
    expect(h.requeued).toEqual([["u1", 1000]]);
    expect(w.state("u1")).toBe("syncing");
  });

  test("syncKnownPods() forgets terminated workers of pods no longer desired", async () => {
    const h = harness();
    const w = createPodWorkers(h.deps);
    w.updatePod({ pod: makePod({ name: "a", uid: "u1" }), type: "create" });
    w.updatePod({ pod: makePod({ name: "b", uid: "u2" }), type: "create" });
    await w.idle();
    w.updatePod({ pod: makePod({ name: "a", uid: "u1" }), type: "kill" });
    await w.idle();
    const states = w.syncKnownPods(new Set(["u2"]));
    expect([...states]).toEqual([["u2", "syncing"]]);
    expect(w.activePods().map((p) => p.metadata.uid)).toEqual(["u2"]);
  });

  test("a create for a terminated UID is remembered: the next syncKnownPods() drops it to start anew", async () => {
    const h = harness();
    const w = createPodWorkers(h.deps);
    const pod = makePod({ name: "a", uid: "u1" });
    w.updatePod({ pod, type: "create" });
    await w.idle();
    w.updatePod({ pod, type: "kill" });
    await w.idle();
    w.updatePod({ pod, type: "create" });
    await w.idle();
    expect(w.state("u1")).toBe("terminated");
    expect(w.syncKnownPods(new Set(["u1"])).has("u1")).toBe(false);
    w.updatePod({ pod, type: "create" });
    await w.idle();
    expect(w.state("u1")).toBe("syncing");
    expect(h.log.filter((l) => l.startsWith("sync a u1 create"))).toHaveLength(2);
  });

  test("a terminated worker of a desired pod that was not asked to restart is kept", async () => {
    const h = harness();
    const w = createPodWorkers(h.deps);
    const pod = makePod({ name: "a", uid: "u1" });
    w.updatePod({ pod, type: "create" });
    await w.idle();
    w.updatePod({ pod, type: "kill" });
    await w.idle();
    expect(w.syncKnownPods(new Set(["u1"])).get("u1")).toBe("terminated");
  });
});

describe("createPodWorkers() retry", () => {
  test("a sync that reports a back-off is requeued after the error back-off, not the resync interval", async () => {
    const h = harness();
    const deps = { ...h.deps, syncPod: async () => ({ terminal: false, retry: true }) };
    const w = createPodWorkers(deps);
    w.updatePod({ pod: makePod({ name: "a", uid: "u1" }), type: "create" });
    await w.idle();
    expect(h.requeued).toEqual([["u1", 1000]]);
  });

  test("a failing termination is retried after the back-off until the agent's signal aborts, then left alone", async () => {
    const h = harness();
    const clock = new FakeClock();
    const stop = new AbortController();
    let attempts = 0;
    const w = createPodWorkers({
      ...h.deps,
      clock,
      signal: stop.signal,
      async syncTerminatingPod() {
        attempts++;
        throw new Error("the runtime is closed");
      },
    });
    const pod = makePod({ name: "a", uid: "u1" });
    w.updatePod({ pod, type: "create" });
    await w.idle();
    w.updatePod({ pod, type: "kill" });
    await until("the first retry wait", () => clock.pending > 0);
    clock.step(1000);
    await until("the second attempt", () => attempts === 2 && clock.pending > 0);
    stop.abort();
    await Bun.sleep(0);
    clock.step(10_000);
    await Bun.sleep(0);
    expect(attempts).toBe(2);
    expect(clock.pending).toBe(0);
    expect(w.state("u1")).toBe("terminating");
  });
});

describe("createPodWorkers() evictions", () => {
  test("an eviction marks the pod evicted, passes its options to both termination steps, and ends terminated", async () => {
    const h = harness();
    const seen: string[] = [];
    const deps: PodWorkersDeps = {
      ...h.deps,
      async syncTerminatingPod(_pod, grace, kill) {
        seen.push(`terminating grace=${grace} evict=${kill.evict} reason=${kill.reason}`);
      },
      async syncTerminatedPod(_pod, kill) {
        seen.push(`terminated evict=${kill.evict}`);
      },
    };
    const w = createPodWorkers(deps);
    const pod = makePod({ name: "hog", uid: "u1" });
    w.updatePod({ pod, type: "create" });
    await w.idle();
    expect(w.isEvicted("u1")).toBe(false);
    w.updatePod({
      pod,
      type: "kill",
      kill: { gracePeriodSeconds: 1, evict: true, reason: "Evicted", message: "low on memory" },
    });
    expect(w.isEvicted("u1")).toBe(true);
    await w.idle();
    expect(seen).toEqual([
      "terminating grace=1 evict=true reason=Evicted",
      "terminated evict=true",
    ]);
    expect(w.state("u1")).toBe("terminated");
    expect(w.activePods()).toEqual([]);
  });

  test("forgetTerminated() lets the same UID start again as a new instance, and only once it is terminated", async () => {
    const h = harness();
    const w = createPodWorkers(h.deps);
    const pod = makePod({ name: "web", uid: "u1" });
    w.updatePod({ pod, type: "create" });
    await w.idle();
    expect(w.forgetTerminated("u1")).toBe(false);
    w.updatePod({ pod, type: "kill", kill: { evict: true } });
    await w.idle();
    w.updatePod({ pod, type: "create" });
    await w.idle();
    expect(h.log.filter((l) => l.startsWith("sync"))).toHaveLength(1); // terminated: ignored
    expect(w.forgetTerminated("u1")).toBe(true);
    expect(w.isEvicted("u1")).toBe(false);
    w.updatePod({ pod, type: "create" });
    await w.idle();
    expect(h.log.filter((l) => l.startsWith("sync"))).toHaveLength(2);
    expect(w.state("u1")).toBe("syncing");
  });
});
