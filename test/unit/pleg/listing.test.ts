import { describe, expect, test } from "bun:test";
import { createListingCache } from "../../../src/agent/pleg/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";

function setup(maxAgeMs: number) {
  const clock = new FakeClock(1_000_000);
  let calls = 0;
  const cache = createListingCache(async () => [++calls], clock, maxAgeMs);
  return { clock, cache, calls: () => calls };
}

describe("createListingCache()", () => {
  test("recent() lists the runtime when nothing was listed yet", async () => {
    const s = setup(1000);
    expect(await s.cache.recent()).toEqual([1]);
    expect(s.calls()).toBe(1);
  });

  test("recent() returns the last fresh listing while it is at most maxAgeMs old", async () => {
    const s = setup(1000);
    await s.cache.fresh();
    s.clock.step(1000);
    expect(await s.cache.recent()).toEqual([1]);
    expect(s.calls()).toBe(1);
  });

  test("recent() lists again once the kept listing is older than maxAgeMs", async () => {
    const s = setup(1000);
    await s.cache.fresh();
    s.clock.step(1001);
    expect(await s.cache.recent()).toEqual([2]);
    expect(s.calls()).toBe(2);
  });

  test("fresh() always lists the runtime", async () => {
    const s = setup(1000);
    await s.cache.fresh();
    expect(await s.cache.fresh()).toEqual([2]);
  });
});
