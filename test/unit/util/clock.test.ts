import { describe, expect, test } from "bun:test";
import { FakeClock, longTimeout } from "../../../src/util/clock.ts";

describe("FakeClock", () => {
  test("step() fires due timers in time order and advances now()", () => {
    const clock = new FakeClock(1000);
    const fired: string[] = [];
    clock.setTimer(300, () => fired.push(`b@${clock.now()}`));
    clock.setTimer(100, () => fired.push(`a@${clock.now()}`));
    clock.setTimer(900, () => fired.push("c"));
    clock.step(500);
    expect(fired).toEqual(["a@1100", "b@1300"]);
    expect(clock.now()).toBe(1500);
    expect(clock.pending).toBe(1);
  });

  test("sleep() resolves when time reaches it and rejects when aborted", async () => {
    const clock = new FakeClock(0);
    let done = false;
    const p = clock.sleep(50).then(() => {
      done = true;
    });
    clock.step(49);
    await Promise.resolve();
    expect(done).toBe(false);
    clock.step(1);
    await p;
    expect(done).toBe(true);

    const ac = new AbortController();
    const q = clock.sleep(10, ac.signal);
    ac.abort(new Error("stop"));
    await expect(q).rejects.toThrow("stop");
    expect(clock.pending).toBe(0);
  });

  test("a cancelled timer never fires", () => {
    const clock = new FakeClock(0);
    let fired = false;
    const cancel = clock.setTimer(10, () => {
      fired = true;
    });
    cancel();
    clock.step(100);
    expect(fired).toBe(false);
  });
});

describe("longTimeout (the real clock's timers)", () => {
  /** Runtime timers that only record: `fire()` runs the pending one. */
  function recordingTimers() {
    const delays: number[] = [];
    let pending: (() => void) | undefined;
    let cleared = 0;
    return {
      delays,
      cleared: () => cleared,
      fire: () => pending?.(),
      timers: {
        set: (fn: () => void, ms: number) => {
          delays.push(ms);
          pending = fn;
          return delays.length;
        },
        clear: () => {
          cleared++;
        },
      },
    };
  }

  test("waits past the runtime's 2^31-1 ms limit in steps instead of firing at once", () => {
    const t = recordingTimers();
    let fired = 0;
    longTimeout(1000 * 3_600_000, () => fired++, t.timers);
    expect(t.delays).toEqual([2 ** 31 - 1]);
    t.fire();
    expect(fired).toBe(0);
    expect(t.delays).toEqual([2 ** 31 - 1, 3_600_000_000 - (2 ** 31 - 1)]);
    t.fire();
    expect(fired).toBe(1);
  });

  test("fires a short, negative or NaN delay after one timer; cancel clears it", () => {
    for (const [ms, want] of [
      [50, 50],
      [-5, 0],
      [Number.NaN, 0],
    ] as const) {
      const t = recordingTimers();
      let fired = 0;
      const cancel = longTimeout(ms, () => fired++, t.timers);
      expect(t.delays).toEqual([want]);
      t.fire();
      expect(fired).toBe(1);
      cancel();
      expect(t.cleared()).toBe(1);
    }
  });
});
