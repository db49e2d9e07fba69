import { describe, expect, test } from "bun:test";
import { FakeClock } from "../../../src/util/clock.ts";

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

describe("FakeClock's two readings", () => {
  test("step() moves the wall and the monotonic reading together; stepWall() moves the wall alone", () => {
    const clock = new FakeClock(5_000);
    const mono = clock.monotonic();
    clock.step(100);
    expect([clock.now(), clock.monotonic() - mono]).toEqual([5_100, 100]);
    clock.stepWall(-86_400_000);
    expect([clock.now(), clock.monotonic() - mono]).toEqual([5_100 - 86_400_000, 100]);
    clock.stepWall(2 * 86_400_000);
    expect([clock.now(), clock.monotonic() - mono]).toEqual([5_100 + 86_400_000, 100]);
  });

  test("timers are due on the monotonic reading: a wall step neither fires nor delays them", () => {
    const clock = new FakeClock(0);
    const fired: number[] = [];
    clock.setTimer(1_000, () => fired.push(clock.now()));
    clock.stepWall(86_400_000);
    clock.step(999);
    expect(fired).toEqual([]);
    clock.stepWall(-2 * 86_400_000);
    clock.step(1);
    expect(fired).toEqual([1_000 - 86_400_000]);
  });

  test("the monotonic origin is far from the wall reading, so mixing them shows", () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    expect(Math.abs(clock.now() - clock.monotonic())).toBeGreaterThan(365 * 86_400_000);
  });
});
