import { describe, expect, test } from "bun:test";
import { createBoundedQueue } from "../../../src/agent/pleg/index.ts";

describe("createBoundedQueue()", () => {
  test("hands items to a waiting reader first, then keeps them in order", async () => {
    const q = createBoundedQueue<number>(2);
    const waiting = q.next();
    q.push(1);
    expect(await waiting).toBe(1);
    q.push(2);
    q.push(3);
    expect(q.size).toBe(2);
    expect([await q.next(), await q.next()]).toEqual([2, 3]);
  });

  test("drops and counts items pushed while full", () => {
    const q = createBoundedQueue<number>(1);
    expect(q.push(1)).toBe(true);
    expect(q.push(2)).toBe(false);
    expect(q.dropped).toBe(1);
  });

  test("next() rejects on abort and the aborted reader receives nothing", async () => {
    const q = createBoundedQueue<number>(1);
    const ac = new AbortController();
    const p = q.next(ac.signal);
    ac.abort(new Error("stop"));
    await expect(p).rejects.toThrow("stop");
    q.push(7);
    expect(q.size).toBe(1);
  });

  test("iterate() yields items and ends quietly on abort", async () => {
    const q = createBoundedQueue<string>(4);
    const ac = new AbortController();
    q.push("a");
    q.push("b");
    const seen: string[] = [];
    for await (const item of q.iterate(ac.signal)) {
      seen.push(item);
      if (seen.length === 2) setTimeout(() => ac.abort(), 1);
    }
    expect(seen).toEqual(["a", "b"]);
  });

  test("rejects a capacity below 1", () => {
    expect(() => createBoundedQueue(0)).toThrow("queue capacity must be at least 1, got 0");
  });
});
