import { describe, expect, test } from "bun:test";
import { type GeneratePodStatusInput, generatePodStatus } from "../../../src/agent/status/index.ts";
import type { PodCondition, PodConditionType, PodStatus } from "../../../src/api/types.ts";
import { ctr, inst, makePod, runtime, sandbox, T0 } from "./builders.ts";

function gen(input: Partial<GeneratePodStatusInput>): PodStatus {
  return generatePodStatus({
    pod: makePod(),
    runtime: undefined,
    now: T0,
    hostIP: "192.168.1.10",
    ...input,
  });
}

function cond(status: PodStatus, type: PodConditionType): PodCondition {
  const c = status.conditions?.find((x) => x.type === type);
  if (!c) throw new Error(`no ${type} condition`);
  return c;
}

const probe = { exec: { command: ["true"] } };

describe("generatePodStatus() conditions", () => {
  test("lists the kubelet conditions in kubelet's order", () => {
    expect(gen({}).conditions?.map((c) => c.type)).toEqual([
      "PodReadyToStartContainers",
      "Initialized",
      "Ready",
      "ContainersReady",
      "PodScheduled",
    ]);
  });

  test("a running pod without probes is ready everywhere", () => {
    const status = gen({ runtime: runtime([inst("web", "running")]) });
    for (const type of [
      "PodReadyToStartContainers",
      "Initialized",
      "Ready",
      "ContainersReady",
      "PodScheduled",
    ] as const) {
      expect(cond(status, type)).toEqual({
        type,
        status: "True",
        lastTransitionTime: "2024-05-01T10:00:00Z",
      });
    }
  });

  test("PodReadyToStartContainers is False without a ready sandbox with an IP", () => {
    expect(cond(gen({}), "PodReadyToStartContainers").status).toBe("False");
    const notReady = runtime([], [sandbox({ state: "notready" })]);
    expect(cond(gen({ runtime: notReady }), "PodReadyToStartContainers").status).toBe("False");
    const noIP = runtime([], [sandbox({ ips: [] })]);
    expect(cond(gen({ runtime: noIP }), "PodReadyToStartContainers").status).toBe("False");
    const hostNet = runtime([], [sandbox({ ips: [], hostNetwork: true })]);
    const pod = makePod({ hostNetwork: true });
    expect(cond(gen({ pod, runtime: hostNet }), "PodReadyToStartContainers").status).toBe("True");
  });

  test("Initialized is False naming the init containers not yet succeeded", () => {
    const pod = makePod({ initContainers: [ctr("init1"), ctr("init2")] });
    const status = gen({
      pod,
      runtime: runtime([inst("init1", "exited"), inst("init2", "running", { at: 5 })]),
    });
    expect(cond(status, "Initialized")).toMatchObject({
      status: "False",
      reason: "ContainersNotInitialized",
      message: "containers with incomplete status: [init2]",
    });
    expect(cond(gen({ pod }), "Initialized").message).toBe(
      "containers with incomplete status: [init1 init2]",
    );
  });

  test("Initialized is True once an app container has started", () => {
    const pod = makePod({ initContainers: [ctr("init1")] });
    const status = gen({
      pod,
      runtime: runtime([inst("init1", "exited"), inst("web", "running", { at: 5 })]),
    });
    expect(cond(status, "Initialized").status).toBe("True");
  });

  test("ContainersReady and Ready name the unready containers", () => {
    const pod = makePod({ containers: [ctr("web", { readinessProbe: probe }), ctr("log")] });
    const status = gen({ pod, runtime: runtime([inst("web", "running"), inst("log", "running")]) });
    const expected = {
      status: "False",
      reason: "ContainersNotReady",
      message: "containers with unready status: [web]",
    };
    expect(cond(status, "ContainersReady")).toMatchObject(expected);
    expect(cond(status, "Ready")).toMatchObject(expected);
  });

  test("Ready is False while the pod is terminating, ContainersReady stays True", () => {
    const status = gen({ runtime: runtime([inst("web", "running")]), terminating: true });
    expect(cond(status, "Ready")).toMatchObject({ status: "False", reason: "PodTerminating" });
    expect(cond(status, "ContainersReady").status).toBe("True");
  });

  test("a Succeeded pod reports PodCompleted", () => {
    const pod = makePod({ restartPolicy: "Never", initContainers: [ctr("init1")] });
    const status = gen({
      pod,
      runtime: runtime([inst("init1", "exited"), inst("web", "exited", { at: 5 })]),
    });
    expect(status.phase).toBe("Succeeded");
    expect(cond(status, "ContainersReady")).toMatchObject({
      status: "False",
      reason: "PodCompleted",
    });
    expect(cond(status, "Ready")).toMatchObject({ status: "False", reason: "PodCompleted" });
    expect(cond(status, "Initialized")).toMatchObject({ status: "True", reason: "PodCompleted" });
  });

  test("lastTransitionTime is kept while a condition's status is unchanged", () => {
    const rt = runtime([inst("web", "running")]);
    const first = gen({ runtime: rt, now: T0 });
    const second = gen({ runtime: rt, now: T0 + 60_000, previous: first });
    expect(cond(second, "Ready").lastTransitionTime).toBe("2024-05-01T10:00:00Z");
    const third = gen({ runtime: rt, now: T0 + 120_000, previous: second, terminating: true });
    expect(cond(third, "Ready").lastTransitionTime).toBe("2024-05-01T10:02:00Z");
    expect(cond(third, "ContainersReady").lastTransitionTime).toBe("2024-05-01T10:00:00Z");
  });

  test("conditions not owned by the kubelet are carried over", () => {
    const previous: PodStatus = {
      conditions: [{ type: "DisruptionTarget", status: "True", reason: "TerminationByKubelet" }],
    };
    const status = gen({ previous, now: T0 });
    expect(status.conditions?.[0]).toMatchObject({ type: "DisruptionTarget", status: "True" });
  });
});
