// The PLEG and the work queue keep their times on the monotonic clock: a step of the wall clock
// (a board's clock set by NTP hours after boot) neither stops relists, nor makes the cache refuse
// a newer status as older, nor holds or hurries a pod's next sync.
import { describe, expect, test } from "bun:test";
import type { ContainerState, PodStatus } from "../../../src/agent/kubecontainer/types.ts";
import { createPLEG, type RelistPod } from "../../../src/agent/pleg/index.ts";
import { createWorkQueue } from "../../../src/agent/syncloop/work-queue.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";

const DAY = 86_400_000;
const steps = [
  ["back", -DAY],
  ["forward", DAY],
] as const;

function setup() {
  const clock = new FakeClock();
  const pods = new Map<string, RelistPod>();
  let lists = 0;
  const set = (uid: string, state: ContainerState) =>
    pods.set(uid, {
      uid,
      name: `pod-${uid}`,
      namespace: "default",
      containers: [{ id: "c1", state }],
    });
  const pleg = createPLEG({
    clock,
    logger: nullLogger,
    relistPeriodMs: 1000,
    listPods: async () => {
      lists++;
      return [...pods.values()];
    },
    getPodStatus: async (uid, name, namespace): Promise<PodStatus> => ({
      uid,
      name,
      namespace,
      ips: [],
      sandboxes: [],
      containers: [...(pods.get(uid)?.containers ?? [])].map((c) => ({
        id: c.id,
        name: "app",
        state: c.state,
        createdAt: 0,
        startedAt: 0,
        finishedAt: 0,
        exitCode: 0,
      })) as unknown as PodStatus["containers"],
      timestamp: clock.monotonic(),
    }),
  });
  return { clock, pleg, set, lists: () => lists };
}

describe("the PLEG and wall-clock steps", () => {
  test.each(steps)(
    "after a wall step %s of a day, a relist still reads a changed pod into the cache and says it died",
    async (_d, step) => {
      const { clock, pleg, set } = setup();
      set("p1", "running");
      await pleg.relist();
      await pleg.next(AbortSignal.timeout(100));
      clock.stepWall(step);
      clock.step(1000);
      set("p1", "exited");
      await pleg.relist();
      expect(await pleg.next(AbortSignal.timeout(100))).toMatchObject({ type: "ContainerDied" });
      expect(pleg.cache.get("p1")?.status?.containers[0]?.state).toBe("exited");
      expect(pleg.healthy()).toBe(true);
    },
  );

  test.each(steps)(
    "run() relists once a period through a wall step %s of a day",
    async (_d, step) => {
      const { clock, pleg, lists } = setup();
      const ctl = new AbortController();
      const done = pleg.run(ctl.signal);
      const settle = () => new Promise<void>((r) => setImmediate(r));
      await settle();
      const before = lists();
      clock.stepWall(step);
      for (let i = 0; i < 5; i++) {
        clock.step(1000);
        await settle();
      }
      expect(lists() - before).toBe(5);
      ctl.abort();
      await done;
    },
  );
});

describe("the work queue and wall-clock steps", () => {
  test.each(steps)("a pod queued for 10 s is due after 10 s through a wall step %s", (_d, step) => {
    const clock = new FakeClock();
    const q = createWorkQueue(clock);
    q.enqueue("p1", 10_000);
    clock.stepWall(step);
    clock.step(9_999);
    expect(q.takeDue()).toEqual([]);
    clock.step(1);
    expect(q.takeDue()).toEqual(["p1"]);
  });
});
