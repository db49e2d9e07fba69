import { describe, expect, test } from "bun:test";
import { createPodManager } from "../../../src/agent/podmanager/index.ts";
import { makePod } from "../../lib/builders.ts";

describe("pod manager", () => {
  test("finds a wanted pod by UID and by namespace and name", () => {
    const pods = createPodManager();
    const web = makePod({ name: "web", uid: "w1" });
    pods.setPod(web);
    expect(pods.pod("w1")).toBe(web);
    expect(pods.has("w1")).toBe(true);
    expect(pods.podByFullName("default", "web")).toBe(web);
    expect(pods.podByFullName("other", "web")).toBeUndefined();
    expect([...pods.pods().keys()]).toEqual(["w1"]);
  });

  test("forgets a removed pod by UID and by name", () => {
    const pods = createPodManager();
    pods.setPod(makePod({ name: "web", uid: "w1" }));
    pods.removePod("w1");
    expect(pods.pod("w1")).toBeUndefined();
    expect(pods.podByFullName("default", "web")).toBeUndefined();
    expect(pods.pods().size).toBe(0);
  });

  test("a name taken by a new UID is not lost when the old UID is removed", () => {
    const pods = createPodManager();
    pods.setPod(makePod({ name: "web", uid: "old" }));
    const next = makePod({ name: "web", uid: "new" });
    pods.setPod(next);
    pods.removePod("old");
    expect(pods.podByFullName("default", "web")).toBe(next);
  });

  test("a pod renamed under its UID is found by its new name only", () => {
    const pods = createPodManager();
    pods.setPod(makePod({ name: "a", uid: "u1" }));
    pods.setPod(makePod({ name: "b", uid: "u1" }));
    expect(pods.podByFullName("default", "a")).toBeUndefined();
    expect(pods.podByFullName("default", "b")?.metadata.uid).toBe("u1");
  });

  test("shows a removed pod as Terminating until its worker is done", () => {
    const pods = createPodManager();
    const keep = makePod({ name: "keep", uid: "k1" });
    const gone = makePod({ name: "gone", uid: "g1" });
    pods.setPod(keep);
    pods.setPod(gone);
    pods.removePod("g1");
    const deleting = pods.markRemoving(gone, Date.UTC(2026, 0, 1, 0, 0, 0, 500));
    expect(deleting.metadata.deletionTimestamp).toBe("2026-01-01T00:00:00Z");
    expect(deleting.metadata.deletionGracePeriodSeconds).toBe(30);
    expect(Object.isFrozen(deleting.metadata)).toBe(true);
    expect(pods.has("g1")).toBe(false);
    expect(pods.visiblePods(() => true)).toEqual([keep, deleting]);
    expect(pods.visiblePods(() => false)).toEqual([keep]);
    expect(pods.visiblePods(() => true)).toEqual([keep]);
  });

  test("a removed pod wanted again is shown once, as the wanted pod", () => {
    const pods = createPodManager();
    const pod = makePod({ name: "web", uid: "w1" });
    pods.markRemoving(pod, 0);
    pods.setPod(pod);
    expect(pods.visiblePods(() => true)).toEqual([pod]);
  });
});
