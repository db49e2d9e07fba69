// The dashboard's rollout model (src/hub/dashboard/rollout-model.js, plain browser JS).
import { describe, expect, test } from "bun:test";
import {
  deviceRolloutState,
  devicesByAttention,
  revisionRows,
  rolloutState,
  updatedOf,
} from "../../../src/hub/dashboard/rollout-model.js";

describe("dashboard rollout model", () => {
  test("revisionRows() lists every kept revision newest first, marking the current and the stable one", () => {
    const view = {
      metadata: { name: "web", namespace: "default" },
      updateRevision: 3,
      stableRevision: 2,
      phase: "Failed",
      message: "",
      settings: {
        maxUnavailable: 1,
        canary: 1,
        progressDeadlineSeconds: 600,
        minReadySeconds: 0,
        autoRollback: true,
      },
      revisions: [{ revision: 2, devices: 4 }],
      devices: [],
    };
    const rev = (revision: number, cause?: string) => ({
      revision,
      metadata: {
        creationTimestamp: `2026-01-0${revision}T00:00:00Z`,
        ...(cause !== undefined && { annotations: { "kubernetes.io/change-cause": cause } }),
      },
    });
    expect(revisionRows(view, [rev(1), rev(3, "image v3"), rev(2)])).toEqual([
      {
        revision: 3,
        devices: 0,
        mark: { label: "Current", tone: "bad" },
        cause: "image v3",
        created: "2026-01-03T00:00:00Z",
      },
      {
        revision: 2,
        devices: 4,
        mark: { label: "Stable", tone: "none" },
        cause: "",
        created: "2026-01-02T00:00:00Z",
      },
      { revision: 1, devices: 0, cause: "", created: "2026-01-01T00:00:00Z" },
    ]);
  });

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
