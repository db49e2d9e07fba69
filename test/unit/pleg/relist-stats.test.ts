import { describe, expect, test } from "bun:test";
import { createPLEG } from "../../../src/agent/pleg/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";

function setup(listTakesMs: number, fail: { list: boolean }) {
  const clock = new FakeClock(1_000_000);
  const pleg = createPLEG({
    clock,
    logger: nullLogger,
    relistPeriodMs: 1000,
    listPods: async () => {
      clock.step(listTakesMs);
      if (fail.list) throw new Error("runtime down");
      return [];
    },
    getPodStatus: async () => {
      throw new Error("no pods");
    },
  });
  return { clock, pleg };
}

describe("PLEG relistStats()", () => {
  test("is empty before the first relist", () => {
    const { pleg } = setup(5, { list: false });
    expect(pleg.relistStats()).toEqual({
      count: 0,
      totalMs: 0,
      lastMs: undefined,
      events: 0,
      eventRelists: 0,
    });
  });

  test("counts successful relists and sums their durations by the clock", async () => {
    const { pleg } = setup(7, { list: false });
    await pleg.relist();
    await pleg.relist();
    expect(pleg.relistStats()).toMatchObject({ count: 2, totalMs: 14, lastMs: 7 });
  });

  test("does not count a relist whose listing failed", async () => {
    const fail = { list: true };
    const { pleg } = setup(3, fail);
    await pleg.relist();
    expect(pleg.relistStats().count).toBe(0);
    fail.list = false;
    await pleg.relist();
    expect(pleg.relistStats()).toMatchObject({ count: 1, totalMs: 3, lastMs: 3 });
  });
});
