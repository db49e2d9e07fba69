import { describe, expect, test } from "bun:test";
import {
  type ContainerGCInput,
  type GCContainer,
  type GCSandbox,
  type PodGCState,
  planContainerGC,
} from "../../../src/agent/gc/index.ts";

const NOW = 1_000_000;

/** A container of pod `pod`, named `name`, created `age` ms before NOW in sandbox `sb`. */
function c(
  id: string,
  pod: string,
  name: string,
  age: number,
  state: GCContainer["state"] = "exited",
  sb = `${pod}-sb`,
): GCContainer {
  return { id, podUid: pod, name, sandboxId: sb, state, createdAt: NOW - age };
}

function sb(id: string, pod: string, age: number, ready = false): GCSandbox {
  return { id, podUid: pod, ready, createdAt: NOW - age };
}

function plan(
  containers: GCContainer[],
  opts: {
    sandboxes?: GCSandbox[];
    minAgeMs?: number;
    maxPer?: number;
    max?: number;
    states?: Record<string, PodGCState>;
    sourcesReady?: boolean;
  } = {},
) {
  const input: ContainerGCInput = {
    containers,
    sandboxes: opts.sandboxes ?? [],
    now: NOW,
    policy: {
      minAgeMs: opts.minAgeMs ?? 0,
      maxPerPodContainer: opts.maxPer ?? 1,
      maxContainers: opts.max ?? -1,
    },
    sourcesReady: opts.sourcesReady ?? true,
    createdGraceMs: 100,
    podState: (uid) => opts.states?.[uid] ?? "active",
  };
  return planContainerGC(input);
}

const removedContainers = (actions: ReturnType<typeof plan>) =>
  actions.filter((a) => a.kind === "removeContainer").map((a) => a.id);
const removedSandboxes = (actions: ReturnType<typeof plan>) =>
  actions.filter((a) => a.kind === "removeSandbox").map((a) => a.id);

describe("planContainerGC() containers", () => {
  const cases: [string, GCContainer[], Parameters<typeof plan>[1], string[]][] = [
    [
      "keeps the newest dead instance of each container, removing the others oldest first",
      [c("a1", "p", "a", 30), c("a2", "p", "a", 20), c("a3", "p", "a", 10), c("b1", "p", "b", 5)],
      {},
      ["a1", "a2"],
    ],
    [
      "never removes a running container, nor counts it",
      [c("r", "p", "a", 40, "running"), c("a1", "p", "a", 30), c("a2", "p", "a", 20)],
      {},
      ["a1"],
    ],
    [
      "keeps dead containers younger than the minimum age",
      [c("a1", "p", "a", 300), c("a2", "p", "a", 200), c("a3", "p", "a", 50)],
      { minAgeMs: 100 },
      ["a1"],
    ],
    [
      "keeps every dead instance when the per-container limit is -1",
      [c("a1", "p", "a", 30), c("a2", "p", "a", 20)],
      { maxPer: -1 },
      [],
    ],
    [
      "removes every dead instance when the per-container limit is 0",
      [c("a1", "p", "a", 30), c("a2", "p", "a", 20), c("r", "p", "a", 10, "running")],
      { maxPer: 0 },
      ["a1", "a2"],
    ],
    [
      "groups by pod UID and container name, not by name alone",
      [c("x1", "p", "a", 30), c("y1", "q", "a", 20)],
      {},
      [],
    ],
    [
      "over the global limit keeps max(1, limit / groups) per group, then removes the oldest",
      [
        c("a1", "p", "a", 60),
        c("a2", "p", "a", 50),
        c("b1", "q", "b", 40),
        c("b2", "q", "b", 35),
        c("c1", "r", "c", 30),
      ],
      { maxPer: -1, max: 2 },
      // 5 dead in 3 groups: each trimmed to 1 (a1, b1 go), then the oldest of a2, b2, c1 goes.
      ["a1", "b1", "a2"],
    ],
    [
      "over the global limit keeps limit / groups per group when that is above 1",
      [
        c("a1", "p", "a", 60),
        c("a2", "p", "a", 50),
        c("a3", "p", "a", 45),
        c("b1", "q", "b", 40),
        c("b2", "q", "b", 35),
      ],
      { maxPer: -1, max: 4 },
      ["a1"],
    ],
    [
      "removes every dead container of a pod that is gone, once the sources are ready",
      [c("a1", "gone", "a", 30), c("a2", "gone", "a", 20), c("k1", "p", "a", 10)],
      { states: { gone: "gone" } },
      ["a1", "a2"],
    ],
    [
      "leaves a pod the sources do not name to the limits until the sources are ready",
      [c("a1", "gone", "a", 30), c("a2", "gone", "a", 20), c("a3", "gone", "a", 10)],
      { states: { gone: "gone" }, sourcesReady: false, maxPer: 0 },
      // It may be a finished pod: its newest instance stays whatever the limit.
      ["a1", "a2"],
    ],
    [
      "keeps the newest instance of a finished pod's containers whatever the limits",
      [c("a1", "done", "a", 30), c("a2", "done", "a", 20), c("b1", "done", "b", 25)],
      { states: { done: "finished" }, maxPer: 0, max: 0 },
      ["a1"],
    ],
    [
      "counts a container still being started (created, younger than the grace) as alive",
      [c("a1", "p", "a", 300), c("a2", "p", "a", 200), c("new", "p", "a", 50, "created")],
      {},
      // new (created 50 ms ago, grace 100 ms) is being started: a2 stays the dead instance.
      ["a1"],
    ],
    [
      "counts a container left created past the grace (a failed start) as dead",
      [c("a1", "p", "a", 300), c("stuck", "p", "a", 200, "created")],
      {},
      ["a1"],
    ],
    [
      "removes a container in unknown state like a dead one",
      [c("u1", "p", "a", 30, "unknown"), c("a2", "p", "a", 20)],
      {},
      ["u1"],
    ],
  ];
  for (const [name, containers, opts, expected] of cases) {
    test(name, () => {
      expect(removedContainers(plan(containers, opts))).toEqual(expected);
    });
  }

  test("asks to stop a container in unknown state before removing it", () => {
    const actions = plan([c("u1", "p", "a", 30, "unknown"), c("a2", "p", "a", 20)]);
    expect(actions).toEqual([
      { kind: "removeContainer", id: "u1", podUid: "p", name: "a", stopFirst: true },
    ]);
  });
});

describe("planContainerGC() sandboxes", () => {
  test("a wanted pod keeps its newest sandbox; older ones go once not ready and empty", () => {
    const actions = plan(
      [c("a1", "p", "a", 5, "running", "s3"), c("old", "p", "a", 50, "exited", "s2")],
      {
        sandboxes: [sb("s1", "p", 100), sb("s2", "p", 60), sb("s3", "p", 10, true)],
      },
    );
    // s2 still holds the newest dead instance of "a"; s1 is empty and not ready.
    expect(removedSandboxes(actions)).toEqual(["s1"]);
  });

  test("a wanted pod keeps its newest sandbox even when it is not ready and empty", () => {
    const actions = plan([], { sandboxes: [sb("s1", "p", 100), sb("s2", "p", 60)] });
    expect(removedSandboxes(actions)).toEqual(["s1"]);
  });

  test("never removes a ready sandbox", () => {
    const actions = plan([], {
      sandboxes: [sb("s1", "gone", 100, true), sb("s2", "gone", 60)],
      states: { gone: "gone" },
    });
    expect(removedSandboxes(actions)).toEqual(["s2"]);
  });

  test("a gone pod's sandboxes all go, after the containers removed from them", () => {
    const actions = plan([c("a1", "gone", "a", 30, "exited", "s1")], {
      sandboxes: [sb("s1", "gone", 40), sb("s0", "gone", 100)],
      states: { gone: "gone" },
    });
    expect(actions).toEqual([
      { kind: "removeContainer", id: "a1", podUid: "gone", name: "a", stopFirst: false },
      { kind: "removeSandbox", id: "s1", podUid: "gone", after: ["a1"] },
      { kind: "removeSandbox", id: "s0", podUid: "gone", after: [] },
    ]);
  });

  test("an old sandbox emptied by the per-container limit goes in the same pass", () => {
    const actions = plan(
      [c("a1", "p", "a", 50, "exited", "s1"), c("a2", "p", "a", 20, "exited", "s2")],
      { sandboxes: [sb("s1", "p", 60), sb("s2", "p", 30, true)] },
    );
    expect(actions.map((a) => `${a.kind} ${a.id}`)).toEqual([
      "removeContainer a1",
      "removeSandbox s1",
    ]);
  });
});
