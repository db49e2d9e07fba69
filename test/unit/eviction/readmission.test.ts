import { describe, expect, test } from "bun:test";
import { createReadmission } from "../../../src/agent/eviction/readmission.ts";
import type { PressureCondition } from "../../../src/agent/evictionapi/signals.ts";

const MIN = 60_000;

describe("createReadmission()", () => {
  test("an evicted pod is due once its condition has been False for the transition period", () => {
    const r = createReadmission({ transitionMs: 5 * MIN });
    r.record("u1", "default/web", ["MemoryPressure"], true, 0);
    let clearedAt: number | undefined; // True until set
    const falseSince = (c: PressureCondition) => (c === "MemoryPressure" ? clearedAt : 0);
    expect(r.due(falseSince, 10 * MIN)).toEqual([]);
    clearedAt = 10 * MIN;
    expect(r.due(falseSince, 15 * MIN - 1)).toEqual([]);
    expect(r.due(falseSince, 15 * MIN)).toEqual(["u1"]);
    r.forget("u1");
    expect(r.due(falseSince, 20 * MIN)).toEqual([]);
  });

  test("each eviction of the same pod doubles the delay, up to an hour; the count is forgotten after an hour", () => {
    const r = createReadmission({ transitionMs: 10 * MIN });
    const delays: number[] = [];
    for (let i = 0; i < 5; i++) {
      r.record(`u${i}`, "default/web", ["DiskPressure"], true, i * MIN);
      delays.push(r.waiting(`u${i}`)?.delayMs ?? 0);
    }
    expect(delays).toEqual([10 * MIN, 20 * MIN, 40 * MIN, 60 * MIN, 60 * MIN]);
    expect(r.waiting("u4")?.evictions).toBe(5);
    r.record("later", "default/web", ["DiskPressure"], true, 4 * MIN + 61 * MIN);
    expect(r.waiting("later")).toEqual({ delayMs: 10 * MIN, evictions: 1 });
  });

  test("a pod rejected for pressure waits without counting; one evicted for its own storage waits from its eviction", () => {
    const r = createReadmission({ transitionMs: MIN });
    r.record("rejected", "default/a", ["DiskPressure"], false, 0);
    r.record("own", "default/b", [], true, 0);
    expect(r.waiting("rejected")).toEqual({ delayMs: MIN, evictions: 0 });
    const allFalse = () => 0;
    expect(r.due(allFalse, MIN - 1)).toEqual([]);
    expect(r.due(allFalse, MIN).sort()).toEqual(["own", "rejected"]);
  });
});
