import { describe, expect, test } from "bun:test";
import {
  createPodConfig,
  type PodConflict,
  type PodUpdate,
} from "../../../src/agent/sources/index.ts";
import type { Pod } from "../../../src/api/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

function setup(sources: ("file" | "api")[] = ["file"]) {
  const conflicts: PodConflict[] = [];
  const changed: string[] = [];
  const config = createPodConfig({
    sources,
    clock: new FakeClock(Date.UTC(2026, 0, 1)),
    onError: (c) => conflicts.push(c),
    onConflictsChanged: (source) => changed.push(source),
  });
  const drain = () => {
    const out: string[] = [];
    for (let u = config.updates.tryNext(); u; u = config.updates.tryNext()) out.push(show(u));
    return out;
  };
  return { config, conflicts, changed, drain };
}

/** "OP source [uid,...]" */
function show(u: PodUpdate): string {
  return `${u.op} ${u.source} [${u.pods.map((p) => p.metadata.uid).join(",")}]`;
}

describe("PodConfig", () => {
  test("queues ADD for new pods and REMOVE for pods gone from the snapshot", () => {
    const { config, drain } = setup();
    config.set("file", [makePod({ name: "a", uid: "1" }), makePod({ name: "b", uid: "2" })]);
    expect(drain()).toEqual(["ADD file [1,2]"]);
    config.set("file", [makePod({ name: "b", uid: "2" })]);
    expect(drain()).toEqual(["REMOVE file [1]"]);
  });

  test("queues nothing for an identical snapshot", () => {
    const { config, drain } = setup();
    config.set("file", [makePod({ name: "a", uid: "1" })]);
    drain();
    config.set("file", [makePod({ name: "a", uid: "1" })]);
    expect(drain()).toEqual([]);
  });

  test("queues UPDATE for a changed spec, label or annotation of the same uid", () => {
    const { config, drain } = setup();
    config.set("file", [makePod({ name: "a", uid: "1" })]);
    drain();
    config.set("file", [
      makePod({ name: "a", uid: "1", containers: [makeContainer({ image: "x:2" })] }),
    ]);
    config.set("file", [
      makePod({
        name: "a",
        uid: "1",
        containers: [makeContainer({ image: "x:2" })],
        labels: { a: "b" },
      }),
    ]);
    expect(drain()).toEqual(["UPDATE file [1]", "UPDATE file [1]"]);
  });

  test("queues RECONCILE when only the status changed, and nothing for local annotations", () => {
    const { config, drain } = setup();
    config.set("file", [makePod({ name: "a", uid: "1" })]);
    drain();
    config.set("file", [makePod({ name: "a", uid: "1", status: { phase: "Running" } })]);
    expect(drain()).toEqual(["RECONCILE file [1]"]);
    const seenLater = makePod({ name: "a", uid: "1", status: { phase: "Running" } });
    seenLater.metadata.annotations = { "kubernetes.io/config.seen": "2030-01-01T00:00:00Z" };
    config.set("file", [seenLater]);
    expect(drain()).toEqual([]);
  });

  test("queues DELETE for a pod that got a deletionTimestamp", () => {
    const { config, drain } = setup();
    config.set("file", [makePod({ name: "a", uid: "1" })]);
    drain();
    config.set("file", [
      makePod({ name: "a", uid: "1", metadata: { deletionTimestamp: "2026-01-01T00:00:00Z" } }),
    ]);
    expect(drain()).toEqual(["DELETE file [1]"]);
  });

  test("turns an edited static pod (new uid) into REMOVE then ADD", () => {
    const { config, drain } = setup();
    config.set("file", [makePod({ name: "a", uid: "old" })]);
    drain();
    config.set("file", [makePod({ name: "a", uid: "new" })]);
    expect(drain()).toEqual(["REMOVE file [old]", "ADD file [new]"]);
  });

  test("sets config.source and keeps the first config.seen across updates", () => {
    const { config } = setup();
    config.set("file", [makePod({ name: "a", uid: "1" })]);
    const first = config.updates.tryNext()?.pods[0];
    expect(first?.metadata.annotations?.["kubernetes.io/config.source"]).toBe("file");
    expect(first?.metadata.annotations?.["kubernetes.io/config.seen"]).toBe("2026-01-01T00:00:00Z");
    config.set("file", [makePod({ name: "a", uid: "1", labels: { x: "y" } })]);
    const updated = config.updates.tryNext()?.pods[0];
    expect(updated?.metadata.annotations?.["kubernetes.io/config.seen"]).toBe(
      "2026-01-01T00:00:00Z",
    );
    expect(config.pods()).toEqual([updated as Pod]);
  });

  test("reports all sources seen once each sent a snapshot, with an empty ADD for an empty first one", () => {
    const { config, drain } = setup(["file", "api"]);
    expect(config.seenAllSources()).toBe(false);
    config.set("file", []);
    expect(config.seenAllSources()).toBe(false);
    expect(drain()).toEqual(["ADD file []"]);
    config.set("api", [makePod({ name: "h", uid: "9" })]);
    expect(config.seenAllSources()).toBe(true);
    expect(drain()).toEqual(["ADD api [9]"]);
    config.set("file", []);
    expect(drain()).toEqual([]);
  });

  test("keeps a pod name with the higher-priority source (file) and reports the other once", () => {
    const { config, conflicts, drain } = setup(["file", "api"]);
    config.set("file", [makePod({ name: "web", uid: "f" })]);
    config.set("api", [makePod({ name: "web", uid: "h" })]);
    config.set("api", [makePod({ name: "web", uid: "h" })]);
    expect(drain()).toEqual(["ADD file [f]", "ADD api []"]);
    expect(conflicts).toHaveLength(1);
    expect(conflicts[0]?.source).toBe("api");
    expect(conflicts[0]?.pod).toBe("default/web");
    expect(conflicts[0]?.uid).toBe("h");
    expect(conflicts[0]?.message).toBe(
      'pod "default/web" from source "api" is ignored: source "file" already has a pod of that name',
    );
    config.set("file", []);
    expect(drain()).toEqual(["REMOVE file [f]", "ADD api [h]"]);
  });

  test("a file pod takes its name from a running hub pod, which comes back when the file pod goes", () => {
    const { config, changed, drain } = setup(["file", "api"]);
    config.set("file", []);
    config.set("api", [makePod({ name: "web", uid: "h" }), makePod({ name: "db", uid: "d" })]);
    expect(drain()).toEqual(["ADD file []", "ADD api [h,d]"]);
    config.set("file", [makePod({ name: "web", uid: "f" })]);
    expect(drain()).toEqual(["REMOVE api [h]", "ADD file [f]"]);
    expect(config.conflicts("api").map((c) => `${c.pod} ${c.uid}`)).toEqual(["default/web h"]);
    expect(changed).toEqual(["api"]);
    config.set("file", []);
    expect(drain()).toEqual(["REMOVE file [f]", "ADD api [h]"]);
    expect(config.conflicts("api")).toEqual([]);
    expect(changed).toEqual(["api", "api"]);
  });

  test("keeps the first of two pods of the same name in one snapshot", () => {
    const { config, conflicts, drain } = setup(["api"]);
    config.set("api", [makePod({ name: "web", uid: "1" }), makePod({ name: "web", uid: "2" })]);
    expect(drain()).toEqual(["ADD api [1]"]);
    expect(conflicts[0]?.message).toContain("the source sent two pods of that name");
  });

  test("next() waits for an update and rejects when aborted", async () => {
    const { config } = setup();
    const pending = config.updates.next();
    config.set("file", [makePod({ name: "a", uid: "1" })]);
    expect((await pending).op).toBe("ADD");
    const ac = new AbortController();
    const waiting = config.updates.next(ac.signal);
    ac.abort(new Error("stop"));
    await expect(waiting).rejects.toThrow("stop");
  });

  test("throws for a source it was not given", () => {
    const { config } = setup(["file"]);
    expect(() => config.set("api", [])).toThrow('unknown source "api"');
  });
});
