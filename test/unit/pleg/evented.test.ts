// The PLEG driven by the runtime's container events: an event makes it relist at once (and
// again shortly while the listing does not show the event yet); while the event stream flows
// the periodic relist runs every evented period; the schedule's pure parts.
import { describe, expect, test } from "bun:test";
import { createPLEG, type RelistPod } from "../../../src/agent/pleg/index.ts";
import {
  currentPeriod,
  EVENT_RETRIES,
  nextRelistAt,
  RelistScheduler,
  retryDelay,
  showsStopped,
} from "../../../src/agent/pleg/schedule.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";

const T0 = Date.UTC(2026, 0, 1);

/** Lets the PLEG's promises run (no time passes on the fake clock). */
const settle = () => new Promise((r) => setTimeout(r, 1));

function pod(state: "running" | "exited"): RelistPod {
  return {
    uid: "p1",
    name: "web",
    namespace: "default",
    containers: [{ id: "c1", state }],
    sandboxes: [{ id: "sb1", state: "ready" }],
  };
}

function setup(evented = 60_000, acting = new Set<string>()) {
  const clock = new FakeClock(T0);
  const listed = { state: "running" as "running" | "exited", at: [] as number[] };
  const pleg = createPLEG({
    readPending: (uid) => acting.has(uid),
    clock,
    logger: nullLogger,
    relistPeriodMs: 1000,
    eventedRelistPeriodMs: evented,
    listPods: async () => {
      listed.at.push(clock.now() - T0);
      return [pod(listed.state)];
    },
    getPodStatus: async (uid, name, namespace) => ({
      uid,
      name,
      namespace,
      ips: [],
      sandboxes: [],
      containers: [],
      timestamp: clock.now(),
    }),
  });
  const ac = new AbortController();
  const running = pleg.run(ac.signal);
  const stop = async () => {
    ac.abort();
    await running;
  };
  return { clock, pleg, listed, stop };
}

describe("PLEG with container events", () => {
  test("an exit event relists at once, and again every 10 ms until the listing shows it; then a ContainerDied is sent", async () => {
    const { clock, pleg, listed, stop } = setup();
    await settle();
    expect(listed.at).toEqual([0]);
    const started = [await pleg.next(), await pleg.next()]; // the pod as first listed
    expect(started.map((e) => e.type)).toEqual(["ContainerStarted", "ContainerStarted"]);
    clock.step(100);
    pleg.notify({ containerId: "c1", kind: "exited" });
    await settle();
    expect(listed.at).toEqual([0, 100]); // at once, the runtime not showing it yet
    for (const step of [10, 10]) {
      clock.step(step);
      await settle();
    }
    expect(listed.at).toEqual([0, 100, 110, 120]);
    listed.state = "exited";
    clock.step(10);
    await settle();
    expect(listed.at).toEqual([0, 100, 110, 120, 130]);
    expect(await pleg.next()).toEqual({ uid: "p1", type: "ContainerDied", data: "c1" });
    // confirmed: no more retries, the next relist is the periodic one
    clock.step(500);
    await settle();
    expect(listed.at).toHaveLength(5);
    clock.step(500);
    await settle();
    expect(listed.at).toEqual([0, 100, 110, 120, 130, 1130]);
    expect(pleg.relistStats()).toMatchObject({ events: 1, eventRelists: 1 });
    await stop();
  });

  test(`retries every 10 ms five times, then doubling, and gives up after ${EVENT_RETRIES} relists that do not show the event`, () => {
    const s = new RelistScheduler(1000, 60_000);
    s.setFlowing(true, 0);
    s.relisted([pod("running")], 0);
    let now = 5000;
    expect(s.nextAt(now)).toBe(60_000); // the stream flows: the evented period
    s.notify({ containerId: "c1", kind: "exited" }, now);
    expect(s.nextAt(now)).toBe(now); // at once
    const delays: number[] = [];
    for (let i = 0; i < EVENT_RETRIES + 1; i++) {
      s.relisted([pod("running")], now);
      const next = s.nextAt(now);
      delays.push(next - now);
      now = next;
    }
    expect(delays).toEqual([10, 10, 10, 10, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 60_000]);
  });

  test("a further event for a container not yet shown stopped relists at once and starts its retries afresh, every 10 ms", () => {
    const s = new RelistScheduler(1000, 60_000);
    s.setFlowing(true, 0);
    s.relisted([pod("running")], 0);
    let now = 5000;
    s.notify({ containerId: "c1", kind: "exited" }, now); // containerd's /tasks/exit
    for (let i = 0; i < 7; i++) {
      s.relisted([pod("running")], now);
      now = s.nextAt(now);
    }
    expect(now).toBe(5000 + 5 * 10 + 20 + 40);
    s.relisted([pod("running")], now);
    expect(s.nextAt(now) - now).toBe(80);
    s.notify({ containerId: "c1", kind: "exited" }, now + 5); // its /tasks/delete
    expect(s.nextAt(now + 5)).toBe(now + 5);
    const delays: number[] = [];
    now += 5;
    for (let i = 0; i < 3; i++) {
      s.relisted([pod("running")], now);
      const next = s.nextAt(now);
      delays.push(next - now);
      now = next;
    }
    expect(delays).toEqual([10, 10, 10]);
  });

  test("an event the listing shows stops the retries; a listing that failed does not", () => {
    const s = new RelistScheduler(1000, 60_000);
    s.notify({ containerId: "c1", kind: "exited" }, 0);
    s.relisted(undefined, 0);
    expect(s.nextAt(0)).toBe(10);
    s.relisted([pod("exited")], 10);
    expect(s.nextAt(10)).toBe(1010);
  });

  test("an exit while a sync acts on the pod is sent soon after the sync ends: relists 20 ms apart, doubling, up to the relist period", async () => {
    const acting = new Set<string>();
    const { clock, pleg, listed, stop } = setup(60_000, acting);
    pleg.setEventsFlowing(true);
    await settle();
    await pleg.next();
    await pleg.next(); // the pod as first listed
    clock.step(1000);
    await settle();
    expect(listed.at).toEqual([0, 1000]); // the stream now flows: next relist at 61 s
    acting.add("p1");
    listed.state = "exited";
    pleg.notify({ containerId: "c1", kind: "exited" });
    await settle();
    expect(listed.at).toEqual([0, 1000, 1000]); // shown, but left to the sync's read
    for (const step of [20, 40, 80]) {
      clock.step(step);
      await settle();
    }
    expect(listed.at).toEqual([0, 1000, 1000, 1020, 1060, 1140]); // the sync goes on
    acting.delete("p1");
    clock.step(160);
    await settle();
    expect(listed.at).toEqual([0, 1000, 1000, 1020, 1060, 1140, 1300]);
    expect(await pleg.next()).toEqual({ uid: "p1", type: "ContainerDied", data: "c1" });
    await stop();
  });

  test("relists leaving changes for later come 20 ms apart, doubling up to the relist period; one that leaves none ends that", () => {
    const s = new RelistScheduler(1000, 60_000);
    s.setFlowing(true, 0);
    s.relisted([pod("running")], 0);
    let now = 5000;
    const delays: number[] = [];
    for (let i = 0; i < 8; i++) {
      s.relisted([pod("running")], now, true);
      const next = s.nextAt(now);
      delays.push(next - now);
      now = next;
    }
    expect(delays).toEqual([20, 40, 80, 160, 320, 640, 1000, 1000]);
    s.relisted([pod("running")], now);
    expect(s.nextAt(now) - now).toBe(60_000);
    s.relisted([pod("running")], now, true);
    expect(s.nextAt(now) - now).toBe(20);
  });

  test("starts and creations do not relist", async () => {
    const { clock, pleg, listed, stop } = setup();
    await settle();
    pleg.notify({ containerId: "c1", kind: "started" });
    pleg.notify({ containerId: "c2", kind: "created" });
    clock.step(500);
    await settle();
    expect(listed.at).toEqual([0]);
    expect(pleg.relistStats()).toMatchObject({ events: 2, eventRelists: 0 });
    await stop();
  });

  test("a stream that opens relists at once; after one period the evented period applies, until it ends", async () => {
    const { clock, pleg, listed, stop } = setup(60_000);
    await settle();
    clock.step(300);
    pleg.setEventsFlowing(true);
    await settle();
    expect(listed.at).toEqual([0, 300]);
    for (let i = 0; i < 3; i++) {
      clock.step(1000);
      await settle();
    }
    // one relist a period after the stream opened, then none until the evented period
    expect(listed.at).toEqual([0, 300, 1300]);
    clock.step(58_000);
    await settle();
    expect(listed.at).toEqual([0, 300, 1300, 61_300]);
    expect(pleg.healthy()).toBe(true);
    pleg.setEventsFlowing(false);
    clock.step(60_000);
    await settle();
    expect(listed.at).toEqual([0, 300, 1300, 61_300, 121_300]);
    clock.step(1000);
    await settle();
    expect(listed.at).toEqual([0, 300, 1300, 61_300, 121_300, 122_300]);
    await stop();
  });

  test("a long evented period keeps the PLEG healthy between its relists", async () => {
    const { clock, pleg, stop } = setup(300_000);
    pleg.setEventsFlowing(true);
    await settle();
    clock.step(1000);
    await settle();
    clock.step(250_000);
    expect(pleg.healthy()).toBe(true);
    await stop();
  });
});

describe("relist schedule", () => {
  const base = {
    now: 10_000,
    relistPeriodMs: 1000,
    eventedRelistPeriodMs: 30_000,
    lastEnd: 9_500,
  };

  test.each([
    ["no stream", undefined, undefined, 10_500],
    ["a stream open less than a period", 9_200, undefined, 10_500],
    ["a stream open for a period", 9_000, undefined, 39_500],
    ["an event due sooner", 9_000, 10_000, 10_000],
    ["an event due later than the period", undefined, 20_000, 10_500],
  ])("%s: next relist at %p/%p → %d", (_name, flowingSince, soonAt, at) => {
    expect(nextRelistAt({ ...base, flowingSince, soonAt })).toBe(at);
  });

  test("currentPeriod() and retryDelay()", () => {
    expect(currentPeriod({ ...base, flowingSince: undefined })).toBe(1000);
    expect(currentPeriod({ ...base, flowingSince: 9_000 })).toBe(30_000);
    expect([1, 5, 6, 7, 11].map(retryDelay)).toEqual([10, 10, 20, 40, 640]);
  });

  test("showsStopped(): exited, not ready or gone is stopped; running or ready is not", () => {
    const pods = [
      pod("running"),
      {
        ...pod("exited"),
        uid: "p2",
        containers: [{ id: "c2", state: "exited" as const }],
        sandboxes: [{ id: "sb2", state: "notready" as const }],
      },
    ];
    expect(showsStopped(pods, "c1")).toBe(false);
    expect(showsStopped(pods, "sb1")).toBe(false);
    expect(showsStopped(pods, "c2")).toBe(true);
    expect(showsStopped(pods, "sb2")).toBe(true);
    expect(showsStopped(pods, "gone")).toBe(true);
  });
});
