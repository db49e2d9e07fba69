import { describe, expect, test } from "bun:test";
import { Backoff, fullJitter } from "../../../src/util/backoff.ts";

describe("Backoff", () => {
  test("next() doubles the delay from the initial value up to the maximum", () => {
    const b = new Backoff({ initialMs: 10_000, maxMs: 300_000 });
    const delays = [0, 1, 2, 3, 4, 5, 6].map((i) => b.next("c", i));
    expect(delays).toEqual([10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000]);
  });

  test("isInBackoff() is true until the delay since the last failure has passed", () => {
    const b = new Backoff({ initialMs: 1000, maxMs: 8000 });
    b.next("k", 5000);
    expect(b.isInBackoff("k", 5999)).toBe(true);
    expect(b.remaining("k", 5500)).toBe(500);
    expect(b.isInBackoff("k", 6000)).toBe(false);
    expect(b.isInBackoff("other", 5000)).toBe(false);
  });

  test("a key that has not failed for the reset window starts again from the initial delay", () => {
    const b = new Backoff({ initialMs: 1000, maxMs: 8000, resetAfterMs: 60_000 });
    b.next("k", 0);
    b.next("k", 1);
    expect(b.get("k", 2)).toBe(2000);
    expect(b.next("k", 60_002)).toBe(1000);
  });
});

describe("fullJitter()", () => {
  test("stays below the capped exponential delay and scales with random()", () => {
    expect(fullJitter(0, 1000, 60_000, () => 0.5)).toBe(500);
    expect(fullJitter(3, 1000, 60_000, () => 0.999)).toBe(7992);
    expect(fullJitter(20, 1000, 60_000, () => 0.5)).toBe(30_000);
    expect(fullJitter(5, 1000, 60_000, () => 0)).toBe(0);
  });
});
