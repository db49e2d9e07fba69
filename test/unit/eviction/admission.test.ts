import { describe, expect, test } from "bun:test";
import { admitUnderPressure, tolerates } from "../../../src/agent/eviction/admission.ts";
import type { PressureCondition } from "../../../src/agent/evictionapi/signals.ts";
import type { Pod, Toleration } from "../../../src/api/types.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

const bestEffort = makePod({ name: "be" });
const burstable = makePod({
  name: "burst",
  containers: [makeContainer({ resources: { requests: { memory: "10Mi" } } })],
});
const critical = makePod({ name: "crit", spec: { priorityClassName: "system-node-critical" } });
const tolerant = (t: Toleration) => makePod({ name: "tol", spec: { tolerations: [t] } });

describe("admitUnderPressure()", () => {
  const cases: [string, Pod, PressureCondition[], string | undefined][] = [
    ["no pressure admits everything", bestEffort, [], undefined],
    [
      "memory pressure rejects BestEffort",
      bestEffort,
      ["MemoryPressure"],
      "The node had condition: [MemoryPressure]. ",
    ],
    ["memory pressure admits Burstable", burstable, ["MemoryPressure"], undefined],
    [
      "memory pressure admits BestEffort tolerating it",
      tolerant({
        key: "node.kubernetes.io/memory-pressure",
        operator: "Exists",
        effect: "NoSchedule",
      }),
      ["MemoryPressure"],
      undefined,
    ],
    [
      "a toleration of another taint does not help",
      tolerant({ key: "node.kubernetes.io/disk-pressure", operator: "Exists" }),
      ["MemoryPressure"],
      "The node had condition: [MemoryPressure]. ",
    ],
    [
      "disk pressure rejects even Burstable",
      burstable,
      ["DiskPressure"],
      "The node had condition: [DiskPressure]. ",
    ],
    [
      "disk pressure with memory pressure rejects a tolerant BestEffort",
      tolerant({ operator: "Exists" }),
      ["MemoryPressure", "DiskPressure"],
      "The node had condition: [MemoryPressure DiskPressure]. ",
    ],
    ["PID pressure rejects", burstable, ["PIDPressure"], "The node had condition: [PIDPressure]. "],
    [
      "a critical pod is admitted under any pressure",
      critical,
      ["DiskPressure", "PIDPressure"],
      undefined,
    ],
  ];
  for (const [what, pod, conditions, message] of cases) {
    test(what, () => {
      const got = admitUnderPressure(pod, conditions);
      expect(got).toEqual(message === undefined ? undefined : { reason: "Evicted", message });
    });
  }
});

describe("tolerates()", () => {
  const key = "node.kubernetes.io/memory-pressure";
  test("as the kubelet's ToleratesTaint", () => {
    expect(tolerates({ key, operator: "Exists" }, key, "NoSchedule")).toBe(true);
    expect(tolerates({ key }, key, "NoSchedule")).toBe(true); // Equal with the taint's empty value
    expect(tolerates({ key, value: "x" }, key, "NoSchedule")).toBe(false);
    expect(tolerates({ key, operator: "Exists", effect: "NoExecute" }, key, "NoSchedule")).toBe(
      false,
    );
    expect(tolerates({ operator: "Exists" }, key, "NoSchedule")).toBe(true);
  });
});
