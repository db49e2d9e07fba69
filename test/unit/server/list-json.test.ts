// The pod list is served from the API's pod views: the same frozen object while neither the pod
// nor its status changed, and each frozen item's JSON made once.
import { describe, expect, test } from "bun:test";
import { FrozenJson } from "../../../src/agent/server/frozen-json.ts";
import { PodViews } from "../../../src/agent/server/pod-views.ts";
import { createStatusManager } from "../../../src/agent/status/index.ts";
import { json } from "../../../src/api/status.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { deepFreeze } from "../../../src/util/freeze.ts";
import { makePod } from "../../lib/builders.ts";
import { runningStatus } from "./fixtures.ts";

describe("FrozenJson.list()", () => {
  test("writes the same bytes as json() of the list object", async () => {
    const items = [
      deepFreeze(makePod({ name: "a", labels: { "x/y": 'q"uote' } })),
      makePod({ name: "b" }),
    ];
    const frozen = new FrozenJson();
    const ours = await frozen.list("PodList", items).text();
    const plain = await json({ apiVersion: "v1", kind: "PodList", metadata: {}, items }).text();
    expect(ours).toBe(plain);
    expect(await frozen.list("PodList", []).text()).toBe(
      await json({ apiVersion: "v1", kind: "PodList", metadata: {}, items: [] }).text(),
    );
  });

  test("serializes a frozen item once, an unfrozen one every time", async () => {
    let frozenCalls = 0;
    let openCalls = 0;
    const frozen = Object.freeze({ toJSON: () => ({ n: ++frozenCalls }) });
    const open = { toJSON: () => ({ n: ++openCalls }) };
    const json = new FrozenJson();
    await json.list("PodList", [frozen, open]).text();
    const second = await json.list("PodList", [frozen, open]).text();
    expect(frozenCalls).toBe(1);
    expect(openCalls).toBe(2);
    expect(JSON.parse(second).items).toEqual([{ n: 1 }, { n: 2 }]);
  });
});

describe("PodViews.view()", () => {
  const clock = new FakeClock(Date.parse("2024-01-01T00:00:00Z"));

  test("is the same frozen object until the pod's status changes", () => {
    const statuses = createStatusManager({ clock });
    const views = new PodViews(statuses);
    const pod = deepFreeze(makePod({ name: "web" }));
    const uid = pod.metadata.uid as string;
    const pending = views.view(pod);
    expect(pending.status?.phase).toBe("Pending");
    expect(Object.isFrozen(pending)).toBe(true);
    expect(views.view(pod)).toBe(pending);

    statuses.setPodStatus(uid, { phase: "Running", containerStatuses: [runningStatus("app")] });
    const running = views.view(pod);
    expect(running).not.toBe(pending);
    expect(running.status?.phase).toBe("Running");
    expect(running).toMatchObject({ apiVersion: "v1", kind: "Pod", metadata: pod.metadata });
    expect(views.view(pod)).toBe(running);

    statuses.removePod(uid);
    expect(views.view(pod).status?.phase).toBe("Pending");
  });

  test("a new pod object (an update) gets a new view with the same status", () => {
    const statuses = createStatusManager({ clock });
    const views = new PodViews(statuses);
    const pod = deepFreeze(makePod({ name: "web" }));
    statuses.setPodStatus(pod.metadata.uid as string, { phase: "Running" });
    const before = views.view(pod);
    const updated = deepFreeze({ ...pod, metadata: { ...pod.metadata, labels: { v: "2" } } });
    const after = views.view(updated);
    expect(after).not.toBe(before);
    expect(after.metadata.labels).toEqual({ v: "2" });
    expect(after.status).toBe(before.status);
  });
});
