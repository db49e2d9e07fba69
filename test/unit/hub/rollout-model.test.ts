// The dashboard's rollout model (src/hub/dashboard/rollout-model.js, plain browser JS).
import { describe, expect, test } from "bun:test";
import {
  deviceRolloutState,
  devicesByAttention,
  rolloutState,
  updatedOf,
} from "../../../src/hub/dashboard/rollout-model.js";

describe("dashboard rollout model", () => {
  test("a rollout's phase and a device's state become badges with a tone", () => {
    expect(rolloutState("Failed")).toEqual({ label: "Stopped", tone: "bad" });
    expect(rolloutState("Complete").tone).toBe("ok");
    expect(rolloutState("Canary").tone).toBe("warn");
    expect(deviceRolloutState("Updated").tone).toBe("ok");
    expect(deviceRolloutState("Held").tone).toBe("none");
    expect(deviceRolloutState("NameConflict")).toEqual({ label: "NameConflict", tone: "bad" });
  });

  test("devices with a message come first, updated ones last", () => {
    const order = devicesByAttention([
      { name: "a", online: true, state: "Updated" },
      { name: "b", online: true, state: "Waiting" },
      { name: "c", online: true, state: "Updating", message: "crash-looping" },
      { name: "d", online: true, state: "Updating" },
    ]).map((d) => d.name);
    expect(order).toEqual(["c", "d", "b", "a"]);
    expect(updatedOf({ status: { updatedNumberScheduled: 2, desiredNumberScheduled: 3 } })).toBe(
      "2 / 3",
    );
  });
});
