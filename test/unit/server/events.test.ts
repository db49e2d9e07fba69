import { describe, expect, test } from "bun:test";
import { createEventRecorder, manifestRef, podRef } from "../../../src/agent/events/index.ts";
import type { Event } from "../../../src/api/types.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { makePod } from "../../lib/builders.ts";

const start = Date.UTC(2024, 0, 1);
const web = podRef(makePod({ name: "web", uid: "u1" }), { name: "app" });

describe("createEventRecorder()", () => {
  test("records a v1 Event named <object>.<hex nanos> with source fleetlet/<node>", () => {
    const clock = new FakeClock(start);
    const rec = createEventRecorder({ clock, nodeName: "dev1" });
    rec.event(web, "Normal", "Started", "Started container app");
    const [e] = rec.list();
    expect(e).toEqual({
      apiVersion: "v1",
      kind: "Event",
      metadata: { name: `web.${(BigInt(start) * 1_000_000n).toString(16)}`, namespace: "default" },
      involvedObject: {
        kind: "Pod",
        apiVersion: "v1",
        namespace: "default",
        name: "web",
        uid: "u1",
        fieldPath: "spec.containers{app}",
      },
      reason: "Started",
      message: "Started container app",
      type: "Normal",
      source: { component: "fleetlet", host: "dev1" },
      count: 1,
      firstTimestamp: "2024-01-01T00:00:00Z",
      lastTimestamp: "2024-01-01T00:00:00Z",
    });
  });

  test("aggregates repeats of the same object, reason and message into count and lastTimestamp", () => {
    const clock = new FakeClock(start);
    const rec = createEventRecorder({ clock, nodeName: "dev1" });
    rec.event(web, "Warning", "BackOff", "Back-off restarting failed container");
    clock.step(30_000);
    rec.event(web, "Warning", "BackOff", "Back-off restarting failed container");
    rec.event(web, "Warning", "BackOff", "another message");
    const events = rec.list();
    expect(events).toHaveLength(2);
    expect(events[0]).toMatchObject({
      count: 2,
      firstTimestamp: "2024-01-01T00:00:00Z",
      lastTimestamp: "2024-01-01T00:00:30Z",
    });
    expect(events[1]?.count).toBe(1);
    expect(events[0]?.metadata.name).not.toBe(events[1]?.metadata.name);
  });

  test("keeps at most max events, dropping the least recently updated and counting drops", () => {
    const clock = new FakeClock(start);
    const rec = createEventRecorder({ clock, nodeName: "dev1", max: 3 });
    for (const m of ["a", "b", "c"]) rec.event(web, "Normal", "R", m);
    rec.event(web, "Normal", "R", "a"); // refreshes "a": now "b" is the oldest
    rec.event(web, "Normal", "R", "d");
    expect(rec.list().map((e) => e.message)).toEqual(["c", "a", "d"]);
    expect(rec.dropped).toBe(1);
  });

  test("list() filters, and subscribers see every new or updated event until they unsubscribe", () => {
    const rec = createEventRecorder({ clock: new FakeClock(start), nodeName: "dev1" });
    const seen: Event[] = [];
    const stop = rec.subscribe((e) => seen.push(e));
    rec.subscribe(() => {
      throw new Error("a broken subscriber does not stop the others");
    });
    rec.event(web, "Normal", "Pulled", "x");
    rec.event(web, "Normal", "Pulled", "x");
    stop();
    rec.event(web, "Warning", "Failed", "y");
    expect(seen.map((e) => e.count)).toEqual([1, 2]);
    expect(rec.list((e) => e.type === "Warning").map((e) => e.reason)).toEqual(["Failed"]);
  });

  test("refuses a ring size that is not a positive integer", () => {
    expect(() => createEventRecorder({ clock: new FakeClock(), nodeName: "n", max: 0 })).toThrow(
      "event recorder max must be a positive integer, got 0",
    );
  });
});

describe("manifestRef()", () => {
  test("is about the pod when the manifest's pod is known, else about the file, named as in its folder (manifest/bad.yaml)", () => {
    expect(
      manifestRef("/etc/fleetlet/manifests/web.yaml", { namespace: "ns", name: "web", uid: "u" }),
    ).toEqual({
      kind: "Pod",
      namespace: "ns",
      name: "web",
      uid: "u",
    });
    const rec = createEventRecorder({ clock: new FakeClock(start), nodeName: "dev1" });
    rec.event(
      manifestRef("/etc/fleetlet/manifests/bad.yaml"),
      "Warning",
      "FailedParse",
      "line 3: bad",
    );
    const [e] = rec.list();
    expect(e?.involvedObject).toEqual({
      kind: "Manifest",
      namespace: "default",
      name: "bad.yaml",
    });
    expect(e?.metadata.name).toStartWith("bad.yaml.");
  });
});
