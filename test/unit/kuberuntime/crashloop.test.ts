import { describe, expect, test } from "bun:test";
import { CrashLoopBackoff } from "../../../src/agent/kuberuntime/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";

const DAY = 86_400_000;
const opts = { initialMs: 10_000, maxMs: 300_000 };

/** A crash loop: the container exits 500 ms after each start (finishedAt = the wall clock when it
 * exited; the sync its exit triggers sees it at once), and the loop restarts it as soon as the
 * back-off allows, checking every second. `stepAt` steps the wall clock after that many starts.
 * Returns the times between starts (monotonic). */
function loop(clock: FakeClock, b: CrashLoopBackoff, restarts: number, stepAt?: [number, number]) {
  const starts: number[] = [];
  let finishedAt = clock.now();
  while (starts.length < restarts) {
    if (!b.isInBackOffSince("k", finishedAt)) {
      b.next("k", finishedAt);
      starts.push(clock.monotonic());
      clock.step(500);
      finishedAt = clock.now();
      b.isInBackOffSince("k", finishedAt);
      if (stepAt?.[0] === starts.length) clock.stepWall(stepAt[1]);
    }
    clock.step(1_000);
  }
  return starts.slice(1).map((t, i) => t - (starts[i] ?? 0));
}

describe("CrashLoopBackoff", () => {
  test("doubles the delay at each restart up to the cap, measured from the container's exit", () => {
    const clock = new FakeClock();
    const b = new CrashLoopBackoff(opts, clock);
    const delays: number[] = [];
    for (let i = 0; i < 7; i++) {
      const finishedAt = clock.now();
      expect(b.isInBackOffSince("k", finishedAt)).toBe(i > 0);
      clock.step(b.get("k"));
      expect(b.isInBackOffSince("k", finishedAt)).toBe(false);
      b.next("k", finishedAt);
      delays.push(b.get("k"));
      clock.step(1000);
    }
    expect(delays).toEqual([10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000]);
  });

  test("starts again from the initial delay after a container ran more than 10 minutes", () => {
    const clock = new FakeClock();
    const b = new CrashLoopBackoff(opts, clock);
    b.next("k", clock.now());
    clock.step(30_000);
    b.next("k", clock.now() - 10_000);
    expect(b.get("k")).toBe(20_000);
    clock.step(600_001);
    expect(b.isInBackOffSince("k", clock.now())).toBe(false);
    b.next("k", clock.now());
    expect(b.get("k")).toBe(10_000);
  });

  test.each([
    ["back", -DAY],
    ["forward", DAY],
  ])("a wall step %s of a day keeps the loop's pace", (_dir, step) => {
    const steadyClock = new FakeClock();
    const steady = loop(steadyClock, new CrashLoopBackoff(opts, steadyClock), 6);
    expect(steady).toEqual([10_500, 20_500, 40_500, 80_500, 160_500]);
    const clock = new FakeClock();
    expect(loop(clock, new CrashLoopBackoff(opts, clock), 6, [3, step])).toEqual(steady);
  });

  test("an exit stamped after the agent's wall clock (its clock is behind the runtime's) counts from when it is first seen", () => {
    const clock = new FakeClock();
    const b = new CrashLoopBackoff(opts, clock);
    b.next("k", clock.now());
    const finishedAt = clock.now() + 3 * 3_600_000;
    expect(b.isInBackOffSince("k", finishedAt)).toBe(true);
    clock.step(9_999);
    expect(b.isInBackOffSince("k", finishedAt)).toBe(true);
    clock.step(1);
    expect(b.isInBackOffSince("k", finishedAt)).toBe(false);
  });

  test("an exit stamped hours before the agent's wall clock (the runtime's clock is behind) cannot end the back-off before the container's restart plus its run", () => {
    const clock = new FakeClock();
    const b = new CrashLoopBackoff(opts, clock);
    const behind = 6 * 3_600_000;
    b.next("k", clock.now() - behind);
    clock.step(1_000);
    b.next("k", clock.now() - behind, 500);
    expect(b.get("k")).toBe(20_000);
    clock.step(500);
    const finishedAt = clock.now() - behind;
    clock.step(300);
    expect(b.isInBackOffSince("k", finishedAt, 500)).toBe(true);
    clock.step(19_699);
    expect(b.isInBackOffSince("k", finishedAt, 500)).toBe(true);
    clock.step(1);
    expect(b.isInBackOffSince("k", finishedAt, 500)).toBe(false);
  });

  test("gc() forgets keys not restarted within 2 × maxMs, whatever the wall clock did", () => {
    const clock = new FakeClock();
    const b = new CrashLoopBackoff(opts, clock);
    b.next("k", clock.now());
    clock.stepWall(10 * DAY);
    b.gc();
    expect(b.size).toBe(1);
    clock.step(600_001);
    clock.stepWall(-20 * DAY);
    b.gc();
    expect(b.size).toBe(0);
  });
});
