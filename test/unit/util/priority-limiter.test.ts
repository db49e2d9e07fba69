import { describe, expect, test } from "bun:test";
import { FakeClock } from "../../../src/util/clock.ts";
import { type PriorityKey, PriorityLimiter } from "../../../src/util/priority-limiter.ts";

/** A task the test finishes by hand; it logs `label` (default: the key's name) when it starts. */
function task(
  limiter: PriorityLimiter,
  key: PriorityKey,
  log: string[],
  signal?: AbortSignal,
  label = key.name,
) {
  let finish: (ok: boolean) => void = () => {};
  const state = { started: false };
  const done = limiter.run(
    key,
    () => {
      state.started = true;
      log.push(label);
      return new Promise<string>((resolve, reject) => {
        finish = (ok) => (ok ? resolve(label) : reject(new Error(`${label} failed`)));
      });
    },
    signal,
  );
  return {
    get started() {
      return state.started;
    },
    done,
    finish: (ok = true) => finish(ok),
  };
}

/** Lets the limiter's promise callbacks run. */
const settle = () => new Promise((r) => setTimeout(r, 0));

describe("PriorityLimiter", () => {
  test("runs at most `limit` tasks; the next starts when one ends", async () => {
    const limiter = new PriorityLimiter(2, new FakeClock(), 10_000);
    const log: string[] = [];
    const a = task(limiter, { at: 1, name: "a" }, log);
    const b = task(limiter, { at: 1, name: "b" }, log);
    const c = task(limiter, { at: 1, name: "c" }, log);
    await settle();
    expect(log).toEqual(["a", "b"]);
    expect([limiter.running, limiter.waiting]).toEqual([2, 1]);
    b.finish();
    expect(await b.done).toBe("b");
    await settle();
    expect(log).toEqual(["a", "b", "c"]);
    expect([limiter.running, limiter.waiting]).toEqual([2, 0]);
    a.finish();
    c.finish();
    await Promise.all([a.done, c.done]);
    expect([limiter.running, limiter.waiting]).toEqual([0, 0]);
  });

  test("a freed slot goes to the lowest key, then to the earliest to ask", async () => {
    const limiter = new PriorityLimiter(1, new FakeClock(), 10_000);
    const log: string[] = [];
    const first = task(limiter, { at: 9, name: "first" }, log);
    const tasks = [
      task(limiter, { at: 5, name: "b" }, log, undefined, "b1"),
      task(limiter, { at: 5, name: "a" }, log),
      task(limiter, { at: 1, name: "z" }, log),
      task(limiter, { at: 5, name: "b" }, log, undefined, "b2"),
    ];
    await settle();
    expect(log).toEqual(["first"]);
    first.finish();
    for (const t of [tasks[2], tasks[1], tasks[0], tasks[3]]) {
      await settle();
      t?.finish();
    }
    await Promise.all(tasks.map((t) => t.done));
    expect(log).toEqual(["first", "z", "a", "b1", "b2"]);
  });

  test("a task running past releaseAfterMs gives its slot up and goes on", async () => {
    const clock = new FakeClock();
    const limiter = new PriorityLimiter(1, clock, 10_000);
    const log: string[] = [];
    const slow = task(limiter, { at: 1, name: "slow" }, log);
    const next = task(limiter, { at: 2, name: "next" }, log);
    const last = task(limiter, { at: 3, name: "last" }, log);
    await settle();
    clock.step(9_999);
    await settle();
    expect(log).toEqual(["slow"]);
    clock.step(1);
    await settle();
    expect(log).toEqual(["slow", "next"]);
    expect([limiter.running, limiter.waiting]).toEqual([1, 1]);
    // The slow task ending does not free a second slot: "last" still waits for "next".
    slow.finish();
    await slow.done;
    await settle();
    expect(log).toEqual(["slow", "next"]);
    next.finish();
    await next.done;
    await settle();
    expect(log).toEqual(["slow", "next", "last"]);
    last.finish();
    await last.done;
    expect([limiter.running, limiter.waiting, clock.pending]).toEqual([0, 0, 0]);
  });

  test("a failing task frees its slot and its error reaches the caller", async () => {
    const limiter = new PriorityLimiter(1, new FakeClock(), 10_000);
    const log: string[] = [];
    const a = task(limiter, { at: 1, name: "a" }, log);
    const b = task(limiter, { at: 1, name: "b" }, log);
    await settle();
    a.finish(false);
    await expect(a.done).rejects.toThrow("a failed");
    await settle();
    expect(log).toEqual(["a", "b"]);
    b.finish();
    await b.done;
    expect(limiter.running).toBe(0);
  });

  test("an abort while waiting rejects with its reason and the task never runs", async () => {
    const limiter = new PriorityLimiter(1, new FakeClock(), 10_000);
    const log: string[] = [];
    const a = task(limiter, { at: 1, name: "a" }, log);
    const ac = new AbortController();
    const b = task(limiter, { at: 1, name: "b" }, log, ac.signal);
    const c = task(limiter, { at: 2, name: "c" }, log);
    await settle();
    ac.abort(new Error("pod killed"));
    await expect(b.done).rejects.toThrow("pod killed");
    expect([limiter.running, limiter.waiting]).toEqual([1, 1]);
    a.finish();
    await settle();
    expect(log).toEqual(["a", "c"]);
    c.finish();
    await Promise.all([a.done, c.done]);
    expect(b.started).toBe(false);
    expect(limiter.running).toBe(0);

    const aborted = new AbortController();
    aborted.abort(new Error("already"));
    const d = task(limiter, { at: 1, name: "d" }, log, aborted.signal);
    await expect(d.done).rejects.toThrow("already");
    expect(d.started).toBe(false);
  });

  test("limit 0 runs every task at once", async () => {
    const limiter = new PriorityLimiter(0, new FakeClock(), 10_000);
    const log: string[] = [];
    const tasks = ["a", "b", "c"].map((name) => task(limiter, { at: 1, name }, log));
    await settle();
    expect(log).toEqual(["a", "b", "c"]);
    for (const t of tasks) t.finish();
    await Promise.all(tasks.map((t) => t.done));
  });
});
