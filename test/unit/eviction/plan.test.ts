import { describe, expect, test } from "bun:test";
import {
  type EvictionState,
  INITIAL_STATE,
  planCycle,
  reclaimSteps,
} from "../../../src/agent/eviction/plan.ts";
import type { Observation, Signal } from "../../../src/agent/evictionapi/signals.ts";
import { buildThresholds, type Threshold } from "../../../src/agent/evictionapi/thresholds.ts";

const Mi = 2 ** 20;
const Gi = 2 ** 30;

function thresholds(
  hard: Record<string, string>,
  extra: {
    soft?: Record<string, string>;
    grace?: Record<string, number>;
    reclaim?: Record<string, string>;
  } = {},
): Threshold[] {
  return buildThresholds(
    {
      evictionHard: hard,
      evictionSoft: extra.soft ?? {},
      evictionSoftGracePeriod: extra.grace ?? {},
      evictionMinimumReclaim: extra.reclaim ?? {},
    },
    { podCgroups: false },
  );
}

const obs = (entries: [Signal, number, number][]) =>
  new Map<Signal, Observation>(
    entries.map(([s, available, capacity]) => [s, { available, capacity }]),
  );

/** Runs cycles at the given times with the given memory.available, returning each plan. */
function run(list: Threshold[], steps: [number, number][], transitionMs = 5000) {
  let state: EvictionState = INITIAL_STATE;
  return steps.map(([now, available]) => {
    const plan = planCycle({
      thresholds: list,
      observations: obs([["memory.available", available, 8 * Gi]]),
      state,
      now,
      pressureTransitionMs: transitionMs,
    });
    state = plan.state;
    return { conditions: plan.conditions, acting: plan.acting.map((t) => t.value.text) };
  });
}

describe("planCycle()", () => {
  test("a hard threshold acts at once and sets its condition", () => {
    const [plan] = run(thresholds({ "memory.available": "100Mi" }), [[0, 50 * Mi]]);
    expect(plan).toEqual({ conditions: ["MemoryPressure"], acting: ["100Mi"] });
  });

  test("a met threshold stays met until available exceeds threshold + minimum reclaim", () => {
    const list = thresholds(
      { "memory.available": "100Mi" },
      { reclaim: { "memory.available": "50Mi" } },
    );
    const plans = run(list, [
      [0, 50 * Mi], // met
      [1000, 120 * Mi], // above the threshold, below threshold + reclaim: still met
      [2000, 160 * Mi], // above both: released
    ]);
    expect(plans.map((p) => p.acting)).toEqual([["100Mi"], ["100Mi"], []]);
  });

  test("a soft threshold acts only once met for its whole grace period, and starts over if broken", () => {
    const list = thresholds(
      {},
      { soft: { "memory.available": "1Gi" }, grace: { "memory.available": 3000 } },
    );
    const plans = run(list, [
      [0, 500 * Mi],
      [2000, 500 * Mi],
      [2500, 2 * Gi], // broken: the grace period starts over
      [3000, 500 * Mi],
      [5900, 500 * Mi],
      [6000, 500 * Mi],
    ]);
    expect(plans.map((p) => p.acting.length)).toEqual([0, 0, 0, 0, 0, 1]);
    // The condition is True while met, grace period or not.
    expect(plans[0]?.conditions).toEqual(["MemoryPressure"]);
  });

  test("a condition stays True for the transition period after the last time it was met", () => {
    const plans = run(
      thresholds({ "memory.available": "100Mi" }),
      [
        [0, 50 * Mi],
        [1000, 4 * Gi],
        [4999, 4 * Gi],
        [5000, 4 * Gi],
      ],
      5000,
    );
    expect(plans.map((p) => p.conditions)).toEqual([
      ["MemoryPressure"],
      ["MemoryPressure"],
      ["MemoryPressure"],
      [],
    ]);
  });

  test("a zero transition period reports a condition only while met", () => {
    const plans = run(
      thresholds({ "memory.available": "100Mi" }),
      [
        [0, 50 * Mi],
        [1, 4 * Gi],
      ],
      0,
    );
    expect(plans.map((p) => p.conditions)).toEqual([["MemoryPressure"], []]);
  });

  test("memory thresholds act before others; each signal drives its own condition", () => {
    const list = thresholds({
      "nodefs.available": "10%",
      "pid.available": "100",
      "memory.available": "1Gi",
    });
    const plan = planCycle({
      thresholds: list,
      observations: obs([
        ["nodefs.available", 5, 100],
        ["pid.available", 50, 1000],
        ["memory.available", 10 * Mi, 8 * Gi],
      ]),
      state: INITIAL_STATE,
      now: 0,
      pressureTransitionMs: 1000,
    });
    expect(plan.acting.map((t) => t.signal)).toEqual([
      "memory.available",
      "nodefs.available",
      "pid.available",
    ]);
    expect(plan.conditions.sort()).toEqual(["DiskPressure", "MemoryPressure", "PIDPressure"]);
    expect(plan.reclaim?.resource).toBe("memory");
  });

  test("a signal that could not be read meets nothing", () => {
    const plan = planCycle({
      thresholds: thresholds({ "imagefs.available": "15%" }),
      observations: new Map(),
      state: INITIAL_STATE,
      now: 0,
      pressureTransitionMs: 1000,
    });
    expect(plan).toMatchObject({ conditions: [], acting: [] });
  });

  test("the memory stall threshold is met at or above its percentage", () => {
    const list = buildThresholds(
      {
        evictionHard: {},
        evictionSoft: {},
        evictionSoftGracePeriod: {},
        evictionMinimumReclaim: {},
        evictionMemoryStall: "20%",
      },
      { podCgroups: false },
    );
    const at = (stall: number) =>
      planCycle({
        thresholds: list,
        observations: obs([["memory.stall", stall, 100]]),
        state: INITIAL_STATE,
        now: 0,
        pressureTransitionMs: 1000,
      }).conditions;
    expect(at(19.99)).toEqual([]);
    expect(at(20)).toEqual(["MemoryPressure"]);
  });
});

describe("reclaimSteps()", () => {
  const cases: [Signal, boolean, string[]][] = [
    ["nodefs.available", false, ["containers", "images"]],
    ["imagefs.inodesFree", false, ["containers", "images"]],
    ["nodefs.available", true, []],
    ["nodefs.inodesFree", true, []],
    ["imagefs.available", true, ["containers", "images"]],
    ["memory.available", false, []],
    ["pid.available", true, []],
  ];
  for (const [signal, dedicated, steps] of cases) {
    test(`${signal}${dedicated ? " with an image filesystem of its own" : ""}: ${steps.join(", ") || "none"}`, () => {
      expect(reclaimSteps(signal, dedicated)).toEqual(steps as ("containers" | "images")[]);
    });
  }
});
