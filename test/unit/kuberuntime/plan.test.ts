import { describe, expect, test } from "bun:test";
import type { ContainerStatus } from "../../../src/agent/kubecontainer/types.ts";
import { computePodActions, planSteps } from "../../../src/agent/kuberuntime/index.ts";
import type { Pod, RestartPolicy } from "../../../src/api/types.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";
import { exited, instance, podStatus, sandbox } from "./fixtures.ts";

const web = makeContainer({ name: "web" });
const side = makeContainer({ name: "side" });
const podWith = (restartPolicy: RestartPolicy, extra: Partial<Pod["spec"]> = {}) =>
  makePod({ name: "web", containers: [web, side], spec: { restartPolicy, ...extra } });

describe("computePodActions() sandbox", () => {
  test("creates a sandbox and starts every container of a new pod", () => {
    const a = computePodActions(podWith("Always"), undefined);
    expect(a).toMatchObject({
      createSandbox: true,
      killPod: true,
      attempt: 0,
      sandboxId: "",
      containersToStart: [0, 1],
    });
  });

  test("replaces a sandbox that is not ready, killing everything and restarting all containers", () => {
    const pod = podWith("Always");
    const status = podStatus(
      pod,
      [instance(pod, "web", "running")],
      [sandbox({ state: "notready", attempt: 2 })],
    );
    const a = computePodActions(pod, status);
    expect(a).toMatchObject({
      createSandbox: true,
      killPod: true,
      attempt: 3,
      sandboxId: "sb1",
      containersToStart: [0, 1],
    });
  });

  test("replaces the sandbox when the pod's network mode changed", () => {
    const pod = podWith("Always", { hostNetwork: true });
    const a = computePodActions(pod, podStatus(pod, [], [sandbox({ hostNetwork: false })]));
    expect(a).toMatchObject({ createSandbox: true, attempt: 1, sandboxId: "" });
  });

  test("replaces a pod-network sandbox without an IP", () => {
    const pod = podWith("Always");
    expect(computePodActions(pod, podStatus(pod, [], [sandbox({ ips: [] })])).createSandbox).toBe(
      true,
    );
  });

  test("replaces the sandboxes when more than one is ready", () => {
    const pod = podWith("Always");
    const status = podStatus(pod, [], [sandbox({ id: "b", attempt: 1 }), sandbox({ id: "a" })]);
    expect(computePodActions(pod, status)).toMatchObject({
      createSandbox: true,
      attempt: 2,
      sandboxId: "b",
    });
  });

  test("gives a restartPolicy Never pod whose sandbox died no new sandbox, only the kill", () => {
    const pod = podWith("Never");
    const status = podStatus(
      pod,
      [exited(pod, "web", 0)],
      [sandbox({ state: "notready", attempt: 1 })],
    );
    expect(computePodActions(pod, status)).toMatchObject({
      createSandbox: false,
      killPod: true,
      containersToStart: [],
    });
  });

  test("skips containers that succeeded under OnFailure when replacing the sandbox", () => {
    const pod = podWith("OnFailure");
    const status = podStatus(
      pod,
      [exited(pod, "web", 0), exited(pod, "side", 1)],
      [sandbox({ state: "notready" })],
    );
    expect(computePodActions(pod, status).containersToStart).toEqual([1]);
  });

  test("starts from the first init container in a new sandbox", () => {
    const pod = makePod({
      initContainers: [makeContainer({ name: "i0" }), makeContainer({ name: "i1" })],
    });
    expect(computePodActions(pod, undefined)).toMatchObject({
      nextInitContainerToStart: 0,
      initContainersToStart: [0],
      containersToStart: [],
    });
  });
});

describe("computePodActions() restart policy matrix", () => {
  const cases: [RestartPolicy, number, boolean][] = [
    ["Always", 0, true],
    ["Always", 1, true],
    ["OnFailure", 0, false],
    ["OnFailure", 137, true],
    ["Never", 0, false],
    ["Never", 1, false],
  ];
  for (const [policy, code, restart] of cases) {
    test(`${restart ? "restarts" : "does not restart"} a container that exited ${code} under ${policy}`, () => {
      const pod = podWith(policy);
      const status = podStatus(pod, [exited(pod, "web", code), instance(pod, "side", "running")]);
      const a = computePodActions(pod, status);
      expect(a.containersToStart).toEqual(restart ? [0] : []);
      expect(a.killPod).toBe(false);
    });
  }

  test("starts a container that was created but never started, whatever the policy", () => {
    const pod = podWith("Never");
    const status = podStatus(pod, [
      instance(pod, "web", "created"),
      instance(pod, "side", "running"),
    ]);
    expect(computePodActions(pod, status).containersToStart).toEqual([0]);
  });

  test("kills a container in unknown state before restarting it", () => {
    const pod = podWith("Always");
    const unknown = instance(pod, "web", "unknown");
    const a = computePodActions(pod, podStatus(pod, [unknown, instance(pod, "side", "running")]));
    expect(a.containersToStart).toEqual([0]);
    expect(a.containersToKill.get(unknown.id)?.reason).toBe("Unknown");
  });

  test("needs nothing but the pod kill when every container of a Never pod finished", () => {
    const pod = podWith("Never");
    const a = computePodActions(
      pod,
      podStatus(pod, [exited(pod, "web", 0), exited(pod, "side", 2)]),
    );
    expect(a).toMatchObject({ killPod: true, createSandbox: false, containersToStart: [] });
    expect(a.containersToKill.size).toBe(0);
  });

  test("keeps running containers whose spec did not change", () => {
    const pod = podWith("Always");
    const a = computePodActions(
      pod,
      podStatus(pod, [instance(pod, "web", "running"), instance(pod, "side", "running")]),
    );
    expect(planSteps(a)).toEqual([]);
  });

  test("starts nothing for a pod being deleted", () => {
    const pod = podWith("Always");
    pod.metadata.deletionTimestamp = "2024-05-01T10:00:00Z";
    const a = computePodActions(
      pod,
      podStatus(pod, [exited(pod, "web", 1), instance(pod, "side", "running")]),
    );
    expect(a.containersToStart).toEqual([]);
  });
});

describe("computePodActions() kills", () => {
  test("restarts a container whose spec changed, even under restartPolicy Never", () => {
    const pod = podWith("Never");
    const old = instance(pod, "web", "running", { hash: "deadbeef" });
    const a = computePodActions(pod, podStatus(pod, [old, instance(pod, "side", "running")]));
    expect(a.containersToStart).toEqual([0]);
    expect(a.containersToKill.get(old.id)).toEqual({
      name: "web",
      reason: "",
      message: "Container web definition changed, will be restarted",
    });
  });

  test("kills and restarts a container that failed its liveness probe", () => {
    const pod = podWith("Always");
    const running = instance(pod, "web", "running");
    const a = computePodActions(pod, podStatus(pod, [running, instance(pod, "side", "running")]), {
      livenessFailed: new Set([running.id]),
    });
    expect(a.containersToStart).toEqual([0]);
    expect(a.containersToKill.get(running.id)).toEqual({
      name: "web",
      reason: "LivenessProbe",
      message: "Container web failed liveness probe, will be restarted",
    });
  });

  test("kills without restart a container that failed its startup probe under Never", () => {
    const pod = podWith("Never");
    const running = instance(pod, "web", "running");
    const a = computePodActions(pod, podStatus(pod, [running, instance(pod, "side", "running")]), {
      startupFailed: new Set([running.id]),
    });
    expect(a.containersToStart).toEqual([]);
    expect(a.containersToKill.get(running.id)).toMatchObject({
      reason: "StartupProbe",
      message: "Container web failed startup probe",
    });
  });
});

describe("computePodActions() init containers", () => {
  const i0 = makeContainer({ name: "i0" });
  const i1 = makeContainer({ name: "i1" });
  const initPod = (policy: RestartPolicy) =>
    makePod({ initContainers: [i0, i1], containers: [web], spec: { restartPolicy: policy } });
  const plan = (pod: Pod, cs: (p: Pod) => ContainerStatus[]) =>
    computePodActions(pod, podStatus(pod, cs(pod)));

  test("starts the init containers one by one, in order", () => {
    const pod = initPod("Always");
    expect(plan(pod, () => []).initContainersToStart).toEqual([0]);
    expect(plan(pod, (p) => [instance(p, "i0", "running")]).initContainersToStart).toEqual([]);
    expect(plan(pod, (p) => [exited(p, "i0", 0)])).toMatchObject({
      nextInitContainerToStart: 1,
      initContainersToStart: [1],
      containersToStart: [],
    });
  });

  test("starts the app containers once every init container succeeded", () => {
    const a = plan(initPod("Always"), (p) => [exited(p, "i0", 0), exited(p, "i1", 0)]);
    expect(a).toMatchObject({ initContainersToStart: [], containersToStart: [0], killPod: false });
  });

  test("restarts a failed init container unless the policy is Never", () => {
    expect(
      plan(initPod("OnFailure"), (p) => [exited(p, "i0", 0), exited(p, "i1", 1)])
        .initContainersToStart,
    ).toEqual([1]);
  });

  test("fails the pod when an init container fails under restartPolicy Never", () => {
    const a = plan(initPod("Never"), (p) => [exited(p, "i0", 1)]);
    expect(a).toMatchObject({
      killPod: true,
      createSandbox: false,
      initContainersToStart: [],
      containersToStart: [],
    });
  });

  test("treats an OOM-killed init container as failed", () => {
    const a = plan(initPod("Never"), (p) => [exited(p, "i0", 0, { reason: "OOMKilled" })]);
    expect(a.killPod).toBe(true);
  });

  test("does not run init containers again once an app container runs", () => {
    const a = plan(initPod("Always"), (p) => [instance(p, "web", "running")]);
    expect(a).toMatchObject({ initContainersToStart: [], containersToStart: [], killPod: false });
  });

  test("starts a sidecar, then the next init container while the sidecar runs, and restarts it when it exits", () => {
    const sidecar = makeContainer({ name: "proxy", restartPolicy: "Always" });
    const pod = makePod({ initContainers: [sidecar, i1], containers: [web] });
    expect(plan(pod, () => []).initContainersToStart).toEqual([0]);
    expect(plan(pod, (p) => [instance(p, "proxy", "running")]).initContainersToStart).toEqual([1]);
    const later = plan(pod, (p) => [
      exited(p, "proxy", 1),
      exited(p, "i1", 0),
      instance(p, "web", "running"),
    ]);
    expect(later).toMatchObject({ initContainersToStart: [0], containersToStart: [] });
  });
});

describe("planSteps()", () => {
  test("orders kill, sandbox, init containers, then app containers", () => {
    const pod = makePod({ initContainers: [makeContainer({ name: "i0" })] });
    const a = computePodActions(pod, podStatus(pod, [], [sandbox({ state: "notready" })]));
    expect(planSteps(a).map((s) => s.kind)).toEqual([
      "killPod",
      "createSandbox",
      "startInitContainer",
    ]);
  });
});
