import { describe, expect, test } from "bun:test";
import type * as kc from "../../../src/agent/kubecontainer/types.ts";
import { generatePodStatus, type SyncError } from "../../../src/agent/status/index.ts";
import type { ContainerStatus, PodPhase, PodStatus } from "../../../src/api/types.ts";
import { ctr, inst, makePod, type PodOptions, runtime, T0 } from "./builders.ts";

const crash = (name: string): [string, SyncError] => [
  name,
  { reason: "CrashLoopBackOff", message: `back-off 10s restarting failed container=${name}` },
];

interface PhaseCase {
  name: string;
  pod: PodOptions;
  containers?: kc.ContainerStatus[];
  syncErrors?: [string, SyncError][];
  terminal?: boolean;
  previousPhase?: PodPhase;
  phase: PodPhase;
}

const sidecar = ctr("proxy", { restartPolicy: "Always" });

const cases: PhaseCase[] = [
  { name: "nothing created yet is Pending", pod: {}, phase: "Pending" },
  {
    name: "a running container is Running",
    pod: {},
    containers: [inst("web", "running")],
    phase: "Running",
  },
  {
    name: "Always with every container exited 0 stays Running",
    pod: { restartPolicy: "Always" },
    containers: [inst("web", "exited")],
    phase: "Running",
  },
  {
    name: "Always with a crash-looping container stays Running",
    pod: { restartPolicy: "Always" },
    containers: [inst("web", "exited", { exitCode: 1 })],
    syncErrors: [crash("web")],
    phase: "Running",
  },
  {
    name: "OnFailure with every container exited 0 is Succeeded",
    pod: { restartPolicy: "OnFailure" },
    containers: [inst("web", "exited")],
    phase: "Succeeded",
  },
  {
    name: "OnFailure with a failed container stays Running (it restarts)",
    pod: { restartPolicy: "OnFailure" },
    containers: [inst("web", "exited", { exitCode: 1 })],
    phase: "Running",
  },
  {
    name: "Never with a failed container is Failed",
    pod: { restartPolicy: "Never" },
    containers: [inst("web", "exited", { exitCode: 2 })],
    phase: "Failed",
  },
  {
    name: "Never with every container exited 0 is Succeeded",
    pod: { restartPolicy: "Never" },
    containers: [inst("web", "exited")],
    phase: "Succeeded",
  },
  {
    name: "Never with one container still running is Running",
    pod: { restartPolicy: "Never", containers: [ctr("web"), ctr("log")] },
    containers: [inst("web", "exited", { exitCode: 1 }), inst("log", "running")],
    phase: "Running",
  },
  {
    name: "a container created but not started keeps the pod Pending",
    pod: {},
    containers: [inst("web", "created")],
    phase: "Pending",
  },
  {
    name: "a running init container keeps the pod Pending",
    pod: { initContainers: [ctr("init1")] },
    containers: [inst("init1", "running")],
    phase: "Pending",
  },
  {
    name: "a failed init container fails the pod under Never",
    pod: { initContainers: [ctr("init1")], restartPolicy: "Never" },
    containers: [inst("init1", "exited", { exitCode: 1 })],
    phase: "Failed",
  },
  {
    name: "a failed init container keeps the pod Pending under Always",
    pod: { initContainers: [ctr("init1")] },
    containers: [inst("init1", "exited", { exitCode: 1 })],
    syncErrors: [crash("init1")],
    phase: "Pending",
  },
  {
    name: "a failed init container keeps the pod Pending under OnFailure",
    pod: { initContainers: [ctr("init1")], restartPolicy: "OnFailure" },
    containers: [inst("init1", "exited", { exitCode: 1 })],
    phase: "Pending",
  },
  {
    name: "init done and app running is Running",
    pod: { initContainers: [ctr("init1")] },
    containers: [inst("init1", "exited"), inst("web", "running", { at: 10 })],
    phase: "Running",
  },
  {
    name: "a started sidecar and a running app is Running",
    pod: { initContainers: [sidecar] },
    containers: [inst("proxy", "running"), inst("web", "running", { at: 10 })],
    phase: "Running",
  },
  {
    name: "a sidecar not started yet keeps the pod Pending",
    pod: { initContainers: [sidecar] },
    phase: "Pending",
  },
  {
    name: "a terminal pod whose containers all exited 0 is Succeeded whatever the policy",
    pod: { restartPolicy: "Always" },
    containers: [inst("web", "exited")],
    terminal: true,
    phase: "Succeeded",
  },
  {
    name: "a terminal pod with a failed container is Failed whatever the policy",
    pod: { restartPolicy: "Always" },
    containers: [inst("web", "exited", { exitCode: 137 })],
    terminal: true,
    phase: "Failed",
  },
  {
    name: "a pod that was Succeeded never goes back to Running",
    pod: { restartPolicy: "Always" },
    containers: [inst("web", "running")],
    previousPhase: "Succeeded",
    phase: "Succeeded",
  },
  {
    name: "a pod that was Failed never goes back to Pending",
    pod: {},
    previousPhase: "Failed",
    phase: "Failed",
  },
];

describe("generatePodStatus() phase", () => {
  for (const c of cases) {
    test(c.name, () => {
      const previous: PodStatus | undefined = c.previousPhase
        ? { phase: c.previousPhase }
        : undefined;
      const status = generatePodStatus({
        pod: makePod(c.pod),
        runtime: c.containers ? runtime(c.containers) : undefined,
        now: T0 + 60_000,
        hostIP: "192.168.1.10",
        syncErrors: new Map(c.syncErrors ?? []),
        previous,
        terminal: c.terminal ?? false,
      });
      expect(status.phase).toBe(c.phase);
    });
  }

  test("keeps the reason and message of an unchanged phase", () => {
    const status = generatePodStatus({
      pod: makePod(),
      runtime: undefined,
      now: T0,
      hostIP: "192.168.1.10",
      previous: { phase: "Pending", reason: "Waiting", message: "for the network" },
    });
    expect(status).toMatchObject({
      phase: "Pending",
      reason: "Waiting",
      message: "for the network",
    });
  });

  test("failure forces phase Failed with its reason", () => {
    const status = generatePodStatus({
      pod: makePod(),
      runtime: runtime([inst("web", "running")]),
      now: T0,
      hostIP: "192.168.1.10",
      failure: { reason: "Evicted", message: "The node was low on resource: memory." },
    });
    expect(status).toMatchObject({ phase: "Failed", reason: "Evicted" });
    const ready = status.conditions?.find((c) => c.type === "ContainersReady");
    expect(ready).toMatchObject({ status: "False", reason: "PodFailed" });
  });

  test("counts a crash-looping app container as stopped, not waiting", () => {
    const status = generatePodStatus({
      pod: makePod({ restartPolicy: "OnFailure" }),
      runtime: runtime([inst("web", "exited", { exitCode: 1 })]),
      now: T0,
      hostIP: "192.168.1.10",
      syncErrors: new Map([crash("web")]),
    });
    const web = status.containerStatuses?.[0] as ContainerStatus;
    expect(web.state.waiting?.reason).toBe("CrashLoopBackOff");
    expect(status.phase).toBe("Running");
  });
});
