import { describe, expect, test } from "bun:test";
import {
  type DeviceFacts,
  type PlanInput,
  type PodFacts,
  planRollout,
  type RolloutRecord,
} from "../../../src/hub/deploy/plan.ts";

const up: PodFacts = { ready: true, available: true };
const starting: PodFacts = { ready: false, available: false };

/** "cam-1:v1" = online, on v1 and available; "cam-1:v1~" starting; "cam-1:v1!" offline. */
function device(spec: string, extra: Partial<DeviceFacts> = {}): DeviceFacts {
  const [name = "", rev = ""] = spec.split(":");
  const hash = rev.replace(/[~!]$/, "");
  const pods = new Map<string, PodFacts>();
  if (hash !== "") pods.set(hash, rev.endsWith("~") ? starting : up);
  return {
    name,
    eligible: true,
    online: !rev.endsWith("!"),
    ...(hash !== "" && { assigned: hash, deliveredAt: 0 }),
    pods,
    ...extra,
  };
}

const settings = { maxUnavailable: 1, canary: 1, progressDeadlineMs: 60_000, autoRollback: true };

function plan(
  devices: DeviceFacts[],
  record: RolloutRecord,
  update = "v2",
  over: Partial<PlanInput> = {},
) {
  const r = planRollout({ update, record, devices, settings, now: 1000, ...over });
  return { ...r, moves: Object.fromEntries(r.assign) };
}

describe("planRollout()", () => {
  test("the first revision goes to every matching device at once, offline ones too", () => {
    const r = plan([device("a:"), device("b:"), device("c:", { online: false })], {}, "v1");
    expect(r.moves).toEqual({ a: "v1", b: "v1", c: "v1" });
    expect(r.phase).toBe("Rolling");
  });

  test("a device that no longer matches loses its pod", () => {
    const r = plan(
      [device("a:v1"), device("b:v1", { eligible: false })],
      { stableHash: "v1" },
      "v1",
    );
    expect(r.moves).toEqual({ b: null });
    expect(r.phase).toBe("Complete");
  });

  test("the canary step moves one device, then waits for it to be available", () => {
    const devices = [device("a:v1"), device("b:v1"), device("c:v1")];
    const r = plan(devices, { stableHash: "v1" });
    expect(r.moves).toEqual({ a: "v2" });
    expect(r.phase).toBe("Canary");
    const waiting = plan([device("a:v2~"), device("b:v1"), device("c:v1")], { stableHash: "v1" });
    expect(waiting.moves).toEqual({});
    expect(waiting.phase).toBe("Canary");
  });

  test("after the canary, devices move one at a time with maxUnavailable 1", () => {
    const r = plan([device("a:v2"), device("b:v1"), device("c:v1")], { stableHash: "v1" });
    expect(r.record.canaryPassed).toBe("v2");
    expect(r.moves).toEqual({ b: "v2" });
    const next = plan([device("a:v2"), device("b:v2~"), device("c:v1")], {
      stableHash: "v1",
      canaryPassed: "v2",
    });
    expect(next.moves).toEqual({});
    const last = plan([device("a:v2"), device("b:v2"), device("c:v1")], {
      stableHash: "v1",
      canaryPassed: "v2",
    });
    expect(last.moves).toEqual({ c: "v2" });
  });

  test("completes when every online device is available on the new revision; offline ones wait", () => {
    const r = plan([device("a:v2"), device("b:v2"), device("c:v1!")], {
      stableHash: "v1",
      canaryPassed: "v2",
    });
    expect(r.moves).toEqual({});
    expect(r.phase).toBe("Complete");
    expect(r.record.stableHash).toBe("v2");
    const back = plan([device("a:v2"), device("b:v2"), device("c:v1")], r.record);
    expect(back.moves).toEqual({ c: "v2" });
  });

  test("an offline device is not counted unavailable and is not moved", () => {
    const r = plan([device("a:v2"), device("b:v1!"), device("c:v1")], {
      stableHash: "v1",
      canaryPassed: "v2",
    });
    expect(r.moves).toEqual({ c: "v2" });
  });

  test("a device whose pod is already unavailable moves without using the budget", () => {
    const devices = [device("a:v2~"), device("b:v1~"), device("c:v1")];
    const r = plan(devices, { stableHash: "v1", canaryPassed: "v2" });
    expect(r.moves).toEqual({ b: "v2" });
  });

  test("a crash-looping canary stops the rollout and rolls that device back", () => {
    const crashing = device("a:v3", {
      pods: new Map([["v3", { ready: false, available: false, failure: "crash-looping" }]]),
    });
    const r = plan([crashing, device("b:v2"), device("c:v2")], { stableHash: "v2" }, "v3");
    expect(r.phase).toBe("Failed");
    expect(r.moves).toEqual({ a: "v2" });
    expect(r.record.failed).toMatchObject({ hash: "v3", device: "a", rolledBack: true });
    expect(r.record.failed?.message).toBe("crash-looping");
    const later = plan([device("a:v2"), device("b:v2"), device("d:")], r.record, "v3");
    expect(later.moves).toEqual({ d: "v2" });
    expect(later.phase).toBe("Failed");
  });

  test("with auto-rollback off a failure stops the rollout and leaves the device as it is", () => {
    const crashing = device("a:v3", {
      pods: new Map([["v3", { ready: false, available: false, failure: "crash-looping" }]]),
    });
    const r = plan([crashing, device("b:v2")], { stableHash: "v2" }, "v3", {
      settings: { ...settings, autoRollback: false },
    });
    expect(r.phase).toBe("Failed");
    expect(r.moves).toEqual({});
  });

  test("a pod not available within the progress deadline fails the rollout", () => {
    const slow = device("a:v3~", { deliveredAt: 0 });
    expect(plan([slow, device("b:v2")], { stableHash: "v2" }, "v3", { now: 60_000 }).phase).toBe(
      "Canary",
    );
    const r = plan([slow, device("b:v2")], { stableHash: "v2" }, "v3", { now: 60_001 });
    expect(r.phase).toBe("Failed");
    expect(r.record.failed?.message).toContain("progress deadline (60s)");
  });

  test("a device left out (name conflict) neither blocks nor counts", () => {
    const conflict = device("a:v1", { excluded: { reason: "NameConflict", message: "file pod" } });
    const r = plan([conflict, device("b:v2")], { stableHash: "v1", canaryPassed: "v2" });
    expect(r.phase).toBe("Complete");
  });

  test("a new template after a failure starts a new rollout; undo to the stable revision completes", () => {
    const failed: RolloutRecord = {
      stableHash: "v2",
      failed: { hash: "v3", device: "a", message: "x", at: 0, rolledBack: true },
    };
    const undo = plan([device("a:v2"), device("b:v2")], failed, "v2");
    expect(undo.phase).toBe("Complete");
    expect(undo.record.failed).toBeUndefined();
    const v4 = plan([device("a:v2"), device("b:v2")], failed, "v4");
    expect(v4.phase).toBe("Canary");
    expect(v4.moves).toEqual({ a: "v4" });
  });

  test("with every device offline a new revision is not complete, and no canary passes", () => {
    const r = plan([device("a:v1!"), device("b:v1!")], { stableHash: "v1" });
    expect(r.phase).toBe("Canary");
    expect(r.moves).toEqual({});
  });
});
