import { describe, expect, test } from "bun:test";
import { createStatusManager, type StatusChange } from "../../../src/agent/status/index.ts";
import type { PodStatus } from "../../../src/api/types.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { T0 } from "./builders.ts";

const running = (ready: "True" | "False"): PodStatus => ({
  phase: "Running",
  conditions: [{ type: "Ready", status: ready }],
});

describe("createStatusManager()", () => {
  test("stores a status with startTime and transition times set from the clock", () => {
    const m = createStatusManager({ clock: new FakeClock(T0) });
    expect(m.setPodStatus("u1", running("True"))).toBe(true);
    expect(m.getPodStatus("u1")).toEqual({
      phase: "Running",
      conditions: [{ type: "Ready", status: "True", lastTransitionTime: "2024-05-01T10:00:00Z" }],
      startTime: "2024-05-01T10:00:00Z",
    });
    expect(m.getPodStatus("nope")).toBeUndefined();
    expect(m.uids()).toEqual(["u1"]);
  });

  test("keeps lastTransitionTime and startTime while unchanged, moves it on a change", () => {
    const clock = new FakeClock(T0);
    const m = createStatusManager({ clock });
    m.setPodStatus("u1", running("True"));
    clock.step(60_000);
    m.setPodStatus("u1", { ...running("True"), message: "x" });
    expect(m.getPodStatus("u1")?.conditions?.[0]?.lastTransitionTime).toBe("2024-05-01T10:00:00Z");
    m.setPodStatus("u1", running("False"));
    expect(m.getPodStatus("u1")?.conditions?.[0]?.lastTransitionTime).toBe("2024-05-01T10:01:00Z");
    expect(m.getPodStatus("u1")?.startTime).toBe("2024-05-01T10:00:00Z");
  });

  test("notifies subscribers of changes only, and of removal", () => {
    const clock = new FakeClock(T0);
    const m = createStatusManager({ clock });
    const seen: StatusChange[] = [];
    const unsubscribe = m.subscribe((c) => seen.push(c));
    m.setPodStatus("u1", running("True"));
    clock.step(1000);
    expect(m.setPodStatus("u1", running("True"))).toBe(false);
    m.removePod("u1");
    m.removePod("u1");
    expect(seen.map((c) => [c.uid, c.status?.phase])).toEqual([
      ["u1", "Running"],
      ["u1", undefined],
    ]);
    expect(m.getPodStatus("u1")).toBeUndefined();
    unsubscribe();
    m.setPodStatus("u2", running("True"));
    expect(seen).toHaveLength(2);
  });

  test("a throwing listener does not stop the others", () => {
    const m = createStatusManager({ clock: new FakeClock(T0) });
    let called = 0;
    m.subscribe(() => {
      throw new Error("boom");
    });
    m.subscribe(() => called++);
    m.setPodStatus("u1", running("True"));
    expect(called).toBe(1);
  });

  test("keeps its own copy of what it is given, and hands out frozen statuses", () => {
    const m = createStatusManager({ clock: new FakeClock(T0) });
    const seen: (PodStatus | undefined)[] = [];
    m.subscribe((c) => seen.push(c.status));
    const input = running("True");
    m.setPodStatus("u1", input);
    input.phase = "Failed";
    const got = m.getPodStatus("u1") as PodStatus;
    expect(got.phase).toBe("Running");
    expect(() => {
      got.phase = "Unknown";
    }).toThrow(TypeError);
    expect(() => {
      (got.conditions as { status: string }[])[0] = { status: "False" };
    }).toThrow(TypeError);
    expect(Object.isFrozen(seen[0])).toBe(true);
    expect(m.getPodStatus("u1")?.phase).toBe("Running");
  });
});
