import { describe, expect, test } from "bun:test";
import type { ContainerState, PodStatus } from "../../../src/agent/kubecontainer/types.ts";
import {
  createPLEG,
  type PLEGDeps,
  type PodLifecycleEvent,
  type RelistPod,
} from "../../../src/agent/pleg/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";

const T0 = Date.UTC(2024, 4, 1, 10, 0, 0);

/** A runtime whose pods the test edits; getPodStatus counts calls per pod. */
class FakeRuntime {
  pods = new Map<string, RelistPod>();
  statusCalls = new Map<string, number>();
  failStatus = new Set<string>();
  failList = false;
  ips = ["10.88.0.5"];

  constructor(private clock: FakeClock) {}

  set(uid: string, containers: [string, ContainerState][], sandboxReady?: boolean): void {
    this.pods.set(uid, {
      uid,
      name: `pod-${uid}`,
      namespace: "default",
      containers: containers.map(([id, state]) => ({ id, state })),
      ...(sandboxReady === undefined
        ? {}
        : { sandboxes: [{ id: `sb-${uid}`, state: sandboxReady ? "ready" : "notready" }] }),
    });
  }

  deps(extra: Partial<PLEGDeps> = {}): PLEGDeps {
    return {
      clock: this.clock,
      logger: nullLogger,
      relistPeriodMs: 1000,
      listPods: async () => {
        if (this.failList) throw new Error("runtime down");
        return [...this.pods.values()];
      },
      getPodStatus: async (uid, name, namespace) => {
        this.statusCalls.set(uid, (this.statusCalls.get(uid) ?? 0) + 1);
        if (this.failStatus.has(uid)) throw new Error(`cannot inspect ${uid}`);
        return this.status(uid, name, namespace);
      },
      ...extra,
    };
  }

  status(uid: string, name = `pod-${uid}`, namespace = "default"): PodStatus {
    return {
      uid,
      name,
      namespace,
      ips: this.ips,
      sandboxes: [],
      containers: [],
      timestamp: this.clock.monotonic(),
    };
  }
}

function drain(pleg: ReturnType<typeof createPLEG>, n: number): Promise<PodLifecycleEvent[]> {
  return Promise.all(Array.from({ length: n }, () => pleg.next(AbortSignal.timeout(100))));
}

function setup(extra: Partial<PLEGDeps> = {}) {
  const clock = new FakeClock(T0);
  const rt = new FakeRuntime(clock);
  const pleg = createPLEG(rt.deps(extra));
  return { clock, rt, pleg };
}

describe("createPLEG() relist", () => {
  test("emits ContainerStarted for a new running container and caches the pod", async () => {
    const { rt, pleg } = setup();
    rt.set("p1", [["c1", "running"]]);
    await pleg.relist();
    expect(await drain(pleg, 1)).toEqual([{ uid: "p1", type: "ContainerStarted", data: "c1" }]);
    expect(pleg.cache.get("p1")?.status?.uid).toBe("p1");
  });

  test("emits ContainerDied, then ContainerRemoved, as a container exits and goes", async () => {
    const { rt, pleg } = setup();
    rt.set("p1", [["c1", "running"]]);
    await pleg.relist();
    rt.set("p1", [["c1", "exited"]]);
    await pleg.relist();
    rt.set("p1", []);
    await pleg.relist();
    const types = (await drain(pleg, 3)).map((e) => e.type);
    expect(types).toEqual(["ContainerStarted", "ContainerDied", "ContainerRemoved"]);
  });

  test("emits ContainerDied and ContainerRemoved for a running container that vanished", async () => {
    const { rt, pleg } = setup();
    rt.set("p1", [["c1", "running"]]);
    await pleg.relist();
    rt.pods.delete("p1");
    await pleg.relist();
    const events = await drain(pleg, 3);
    expect(events.slice(1).map((e) => e.type)).toEqual(["ContainerDied", "ContainerRemoved"]);
    expect(pleg.cache.get("p1")).toBeUndefined();
  });

  test("turns a sandbox's death into ContainerDied", async () => {
    const { rt, pleg } = setup();
    rt.set("p1", [], true);
    await pleg.relist();
    rt.set("p1", [], false);
    await pleg.relist();
    const events = await drain(pleg, 2);
    expect(events).toEqual([
      { uid: "p1", type: "ContainerStarted", data: "sb-p1" },
      { uid: "p1", type: "ContainerDied", data: "sb-p1" },
    ]);
  });

  test("refreshes the cache for changed pods only", async () => {
    const { rt, pleg } = setup();
    rt.set("p1", [["c1", "running"]]);
    rt.set("p2", [["c2", "running"]]);
    await pleg.relist();
    await pleg.relist();
    rt.set("p2", [["c2", "exited"]]);
    await pleg.relist();
    expect(Object.fromEntries(rt.statusCalls)).toEqual({ p1: 1, p2: 2 });
  });

  test("refreshes the cache for a created container without sending ContainerChanged", async () => {
    const { rt, pleg } = setup();
    rt.set("p1", [["c1", "created"]]);
    await pleg.relist();
    expect(rt.statusCalls.get("p1")).toBe(1);
    await expect(pleg.next(AbortSignal.timeout(20))).rejects.toThrow();
  });

  test("retries a pod whose status read failed, and sends its events only then", async () => {
    const { rt, pleg } = setup();
    rt.set("p1", [["c1", "running"]]);
    rt.failStatus.add("p1");
    await pleg.relist();
    expect(pleg.cache.get("p1")?.error?.message).toBe("cannot inspect p1");
    await expect(pleg.next(AbortSignal.timeout(20))).rejects.toThrow();
    rt.failStatus.clear();
    await pleg.relist();
    expect(rt.statusCalls.get("p1")).toBe(2);
    expect(await drain(pleg, 1)).toEqual([{ uid: "p1", type: "ContainerStarted", data: "c1" }]);
    expect(pleg.cache.get("p1")?.error).toBeUndefined();
  });

  test("drops events when the queue is full and counts them", async () => {
    const { rt, pleg } = setup({ eventCapacity: 2 });
    rt.set("p1", [
      ["a", "running"],
      ["b", "running"],
      ["c", "running"],
    ]);
    await pleg.relist();
    expect(pleg.droppedEvents()).toBe(1);
    expect((await drain(pleg, 2)).map((e) => e.data)).toEqual(["a", "b"]);
  });

  test("keeps a pod's last IPs once its sandbox is gone", async () => {
    const { rt, pleg } = setup();
    rt.set("p1", [["c1", "running"]]);
    await pleg.relist();
    rt.ips = [];
    rt.set("p1", [["c1", "exited"]]);
    await pleg.relist();
    expect(pleg.cache.get("p1")?.status?.ips).toEqual(["10.88.0.5"]);
  });
});

/** A status showing the pod exactly as listed now (what the sync loop reads after acting). */
function listedStatus(rt: FakeRuntime, clock: FakeClock, uid: string): PodStatus {
  const listed = rt.pods.get(uid);
  const c = { name: "app", createdAt: 0, startedAt: 0, finishedAt: 0, exitCode: 0 };
  return {
    ...rt.status(uid),
    sandboxes: (listed?.sandboxes ?? []).map((sb) => ({
      ...sb,
      createdAt: 0,
      attempt: 0,
      ips: [],
      hostNetwork: true,
    })),
    containers: (listed?.containers ?? []).map(({ id, state }) => ({
      ...c,
      id,
      state,
      reason: "",
      message: "",
      image: "busybox",
      imageRef: "",
      hash: "",
      restartCount: 0,
      sandboxId: `sb-${uid}`,
    })),
    timestamp: clock.monotonic(),
  };
}

describe("createPLEG() status reads", () => {
  test("does not read a changed pod again when its cached status matches the listing", async () => {
    const { clock, rt, pleg } = setup();
    rt.set("p1", [["c1", "running"]], true);
    pleg.updateCache("p1", listedStatus(rt, clock, "p1"));
    clock.step(100);
    await pleg.relist();
    expect(rt.statusCalls.get("p1")).toBeUndefined();
    expect((await drain(pleg, 2)).map((e) => e.data)).toEqual(["c1", "sb-p1"]);
    expect(pleg.cache.get("p1")?.timestamp).toBe(clock.monotonic());
  });

  test("reads a changed pod whose cached status differs from the listing", async () => {
    const { clock, rt, pleg } = setup();
    rt.set("p1", [["c1", "running"]], true);
    pleg.updateCache("p1", listedStatus(rt, clock, "p1"));
    await pleg.relist();
    const cases: [string, () => void][] = [
      ["a container's state", () => rt.set("p1", [["c1", "exited"]], true)],
      ["the sandbox's state", () => rt.set("p1", [["c1", "exited"]], false)],
      [
        "a new container",
        () =>
          rt.set(
            "p1",
            [
              ["c2", "created"],
              ["c1", "exited"],
            ],
            false,
          ),
      ],
    ];
    for (const [what, change] of cases) {
      const before = rt.statusCalls.get("p1") ?? 0;
      change();
      await pleg.relist();
      expect({ what, calls: rt.statusCalls.get("p1") }).toEqual({ what, calls: before + 1 });
    }
  });

  test("reads a pod whose cached read failed, and one listed without sandbox states", async () => {
    const { clock, rt, pleg } = setup();
    rt.set("p1", [["c1", "running"]], true);
    pleg.cache.set("p1", listedStatus(rt, clock, "p1"), clock.monotonic(), new Error("timeout"));
    rt.set("p2", [["c2", "running"]]);
    pleg.updateCache("p2", listedStatus(rt, clock, "p2"));
    await pleg.relist();
    expect(Object.fromEntries(rt.statusCalls)).toEqual({ p1: 1, p2: 1 });
  });

  test("leaves a pod the sync loop will read to the next relist, with the same events", async () => {
    const pending = new Set(["p1"]);
    const { clock, rt, pleg } = setup({ readPending: (uid) => pending.has(uid) });
    rt.set("p1", [["c1", "running"]], true);
    rt.set("p2", [["c2", "running"]], true);
    await pleg.relist();
    expect(Object.fromEntries(rt.statusCalls)).toEqual({ p2: 1 });
    expect((await drain(pleg, 2)).every((e) => e.uid === "p2")).toBe(true);
    await pleg.relist();
    await expect(pleg.next(AbortSignal.timeout(20))).rejects.toThrow();
    pleg.updateCache("p1", listedStatus(rt, clock, "p1"));
    pending.clear();
    clock.step(1000);
    await pleg.relist();
    expect(rt.statusCalls.get("p1")).toBeUndefined();
    expect(await drain(pleg, 2)).toEqual([
      { uid: "p1", type: "ContainerStarted", data: "c1" },
      { uid: "p1", type: "ContainerStarted", data: "sb-p1" },
    ]);
  });

  test("still retries a failed read of a pod the sync loop is acting on, once it is done", async () => {
    const pending = new Set<string>();
    const { rt, pleg } = setup({ readPending: (uid) => pending.has(uid) });
    rt.set("p1", [["c1", "running"]], true);
    rt.failStatus.add("p1");
    await pleg.relist();
    rt.failStatus.clear();
    pending.add("p1");
    await pleg.relist();
    expect(rt.statusCalls.get("p1")).toBe(1);
    pending.clear();
    await pleg.relist();
    expect(rt.statusCalls.get("p1")).toBe(2);
    expect((await drain(pleg, 2)).map((e) => e.type)).toEqual([
      "ContainerStarted",
      "ContainerStarted",
    ]);
  });

  test("sends no events for what a sync read back and settled, and sends those of a later change", async () => {
    const settled = new Map<string, PodStatus>();
    const { clock, rt, pleg } = setup({
      settledBySync: (uid, status) => settled.get(uid) === status,
    });
    rt.set("p1", [["c1", "running"]], true);
    rt.set("p2", [["c2", "running"]], true);
    // Both pods were read back by their syncs; only p1's sync found nothing more to do.
    const p1 = listedStatus(rt, clock, "p1");
    pleg.updateCache("p1", p1);
    settled.set("p1", p1);
    pleg.updateCache("p2", listedStatus(rt, clock, "p2"));
    clock.step(100);
    await pleg.relist();
    expect((await drain(pleg, 2)).map((e) => e.uid)).toEqual(["p2", "p2"]);
    await expect(pleg.next(AbortSignal.timeout(20))).rejects.toThrow();
    expect(rt.statusCalls.get("p1")).toBeUndefined();
    // p1's container dies: a status the sync never saw, so its event is sent.
    rt.set("p1", [["c1", "exited"]], true);
    clock.step(1000);
    await pleg.relist();
    expect(rt.statusCalls.get("p1")).toBe(1);
    expect(await drain(pleg, 1)).toEqual([{ uid: "p1", type: "ContainerDied", data: "c1" }]);
  });

  test("removes a gone pod from the cache even while the sync loop acts on it", async () => {
    const pending = new Set<string>();
    const { rt, pleg } = setup({ readPending: (uid) => pending.has(uid) });
    rt.set("p1", [["c1", "exited"]], false);
    await pleg.relist();
    expect(pleg.cache.get("p1")).toBeDefined();
    pending.add("p1");
    rt.pods.delete("p1");
    await pleg.relist();
    expect(pleg.cache.get("p1")).toBeUndefined();
  });
});

describe("createPLEG() cache", () => {
  test("updateCache() stores a fresh status at once and wins over an older relist read", async () => {
    const { clock, rt, pleg } = setup();
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const slow = createPLEG(
      rt.deps({
        cache: pleg.cache,
        getPodStatus: async (uid) => {
          const s = rt.status(uid);
          await gate;
          return s;
        },
      }),
    );
    rt.set("p1", [["c1", "running"]]);
    const relisting = slow.relist();
    await new Promise((r) => setTimeout(r, 1));
    clock.step(500);
    const fresh = { ...rt.status("p1"), ips: ["10.0.0.9"] };
    expect(slow.updateCache("p1", fresh)).toBe(true);
    release();
    await relisting;
    expect(pleg.cache.get("p1")?.status?.ips).toEqual(["10.0.0.9"]);
  });

  test("getNewerThan() waits for a relist that started after the given time", async () => {
    const { clock, rt, pleg } = setup();
    rt.set("p1", [["c1", "running"]]);
    await pleg.relist();
    const after = clock.monotonic();
    let got = false;
    const waiting = pleg.cache.getNewerThan("p1", after).then(() => {
      got = true;
    });
    await Promise.resolve();
    expect(got).toBe(false);
    clock.step(1000);
    await pleg.relist();
    await waiting;
    expect(got).toBe(true);
  });
});

describe("createPLEG() health and run()", () => {
  test("healthy() is false before the first relist and after 3 minutes without one", async () => {
    const { clock, rt, pleg } = setup();
    expect(pleg.healthy()).toBe(false);
    const started = clock.monotonic();
    await pleg.relist();
    expect(pleg.healthy()).toBe(true);
    expect(pleg.lastRelistTime()).toBe(started);
    rt.failList = true;
    clock.step(180_000);
    await pleg.relist();
    expect(pleg.healthy()).toBe(true);
    clock.step(1);
    expect(pleg.healthy()).toBe(false);
    expect(pleg.healthMessage()).toBe("PLEG was last seen active 180s ago; threshold is 180s");
  });

  test("run() relists every period, survives runtime errors and stops on abort", async () => {
    const { clock, rt, pleg } = setup();
    let lists = 0;
    const counting = createPLEG(
      rt.deps({
        listPods: async () => {
          lists++;
          if (lists === 2) throw new Error("transient");
          return [...rt.pods.values()];
        },
      }),
    );
    const ac = new AbortController();
    const done = counting.run(ac.signal);
    const tick = async () => {
      await new Promise((r) => setTimeout(r, 1));
      clock.step(1000);
    };
    for (let i = 0; i < 3; i++) await tick();
    await new Promise((r) => setTimeout(r, 1));
    expect(lists).toBe(4);
    ac.abort();
    await done;
    expect(pleg.healthy()).toBe(false);
  });
});
