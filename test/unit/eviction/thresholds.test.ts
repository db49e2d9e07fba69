import { describe, expect, test } from "bun:test";
import {
  buildThresholds,
  checkMinReclaim,
  checkThresholdValue,
  type EvictionThresholdSettings,
  parsePercentage,
  thresholdQuantity,
} from "../../../src/agent/evictionapi/thresholds.ts";

const none: EvictionThresholdSettings = {
  evictionHard: {},
  evictionSoft: {},
  evictionSoftGracePeriod: {},
  evictionMinimumReclaim: {},
};

describe("eviction thresholds", () => {
  test("percentages are 32-bit float fractions, as the kubelet parses them", () => {
    expect(parsePercentage("10%")).toBe(Math.fround(0.1));
    expect(thresholdQuantity({ percentage: Math.fround(0.1), text: "10%" }, 1000)).toBe(100);
    // The float's error shows on large capacities, as it does in the kubelet.
    expect(thresholdQuantity({ percentage: Math.fround(0.1), text: "10%" }, 100 * 2 ** 30)).toBe(
      10 * 2 ** 30 + 160,
    );
    expect(parsePercentage("ten%")).toBeUndefined();
  });

  test("0% and 100% turn a threshold off; quantities must be positive", () => {
    expect(checkThresholdValue("0%")).toEqual({ value: undefined });
    expect(checkThresholdValue("100%")).toEqual({ value: undefined });
    expect(checkThresholdValue("100Mi")).toEqual({
      value: { quantity: 100 * 2 ** 20, text: "100Mi" },
    });
    expect(checkThresholdValue("0")).toEqual({ error: "must be greater than 0" });
    expect(checkThresholdValue("-1Gi")).toEqual({ error: "must be greater than 0" });
    expect(checkThresholdValue("120%")).toEqual({ error: "must be at most 100%" });
    expect(checkThresholdValue("-5%")).toEqual({ error: "must not be negative" });
    expect(checkThresholdValue("lots")).toEqual({
      error: 'is not a quantity or a percentage (e.g. "100Mi", "10%")',
    });
    expect(checkMinReclaim("0")).toEqual({ value: { quantity: 0, text: "0" } });
    expect(checkMinReclaim("0%")).toEqual({ error: "must be greater than 0%" });
  });

  test("buildThresholds(): hard first then soft, with minimum reclaims; memory copied to the pods' cgroup", () => {
    const list = buildThresholds(
      {
        evictionHard: {
          "nodefs.available": "10%",
          "memory.available": "100Mi",
          "imagefs.inodesFree": "0%",
        },
        evictionSoft: { "memory.available": "300Mi" },
        evictionSoftGracePeriod: { "memory.available": 90_000, "pid.available": 1000 },
        evictionMinimumReclaim: { "memory.available": "50Mi" },
        evictionMemoryStall: "25%",
      },
      { podCgroups: true },
    );
    expect(list.map((t) => [t.signal, t.value.text, t.gracePeriodMs, t.minReclaim?.text])).toEqual([
      ["memory.available", "100Mi", 0, "50Mi"],
      ["nodefs.available", "10%", 0, undefined],
      ["memory.available", "300Mi", 90_000, "50Mi"],
      ["allocatableMemory.available", "100Mi", 0, "50Mi"],
      ["memory.stall", "25%", 0, undefined],
    ]);
    const withoutCgroups = buildThresholds(
      { ...none, evictionHard: { "memory.available": "1Gi" } },
      {
        podCgroups: false,
      },
    );
    expect(withoutCgroups.map((t) => t.signal)).toEqual(["memory.available"]);
  });

  test("buildThresholds() errors name the field, the signal and the value", () => {
    const cases: [Partial<EvictionThresholdSettings>, string][] = [
      [
        { evictionHard: { "memory.available": "lots" } },
        'evictionHard.memory.available: "lots" is not a quantity',
      ],
      [
        { evictionHard: { "memory.free": "1Gi" } },
        "evictionHard.memory.free: unknown eviction signal",
      ],
      [
        { evictionSoft: { "nodefs.available": "20%" } },
        "evictionSoftGracePeriod: a grace period must be given for the soft eviction threshold nodefs.available",
      ],
      [
        {
          evictionHard: { "pid.available": "100" },
          evictionMinimumReclaim: { "pid.available": "-1" },
        },
        'evictionMinimumReclaim.pid.available: "-1" must not be negative',
      ],
      [{ evictionMemoryStall: "0%" }, 'evictionMemoryStall: "0%" is not a percentage above 0%'],
    ];
    for (const [settings, message] of cases) {
      expect(() => buildThresholds({ ...none, ...settings }, { podCgroups: true })).toThrow(
        message,
      );
    }
  });
});
