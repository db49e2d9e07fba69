import { describe, expect, test } from "bun:test";
import {
  crashLoopMessage,
  type GeneratePodStatusInput,
  generatePodStatus,
} from "../../../src/agent/status/index.ts";
import type { ContainerStatus, PodStatus } from "../../../src/api/types.ts";
import { ctr, inst, makePod, runtime, sandbox, T0 } from "./builders.ts";

const HOST = "192.168.1.10";

function gen(input: Partial<GeneratePodStatusInput>): PodStatus {
  return generatePodStatus({ pod: makePod(), runtime: undefined, now: T0, hostIP: HOST, ...input });
}

function app(status: PodStatus, name = "web"): ContainerStatus {
  const s = status.containerStatuses?.find((c) => c.name === name);
  if (!s) throw new Error(`no status for ${name}`);
  return s;
}

function initStatus(status: PodStatus, name: string): ContainerStatus {
  const s = status.initContainerStatuses?.find((c) => c.name === name);
  if (!s) throw new Error(`no init status for ${name}`);
  return s;
}

describe("generatePodStatus() container states and reasons", () => {
  test("a container never created waits with ContainerCreating", () => {
    const s = app(gen({}));
    expect(s).toMatchObject({
      state: { waiting: { reason: "ContainerCreating" } },
      ready: false,
      started: false,
      restartCount: 0,
      image: "web:1",
      imageID: "",
    });
    expect(s.containerID).toBeUndefined();
  });

  test("app containers wait with PodInitializing while init containers run", () => {
    const status = gen({
      pod: makePod({ initContainers: [ctr("init1")] }),
      runtime: runtime([inst("init1", "running")]),
    });
    expect(app(status).state.waiting?.reason).toBe("PodInitializing");
    expect(initStatus(status, "init1").state.running).toBeDefined();
  });

  test("a running container reports its ID, image, imageID and start time", () => {
    const status = gen({ runtime: runtime([inst("web", "running", { id: "abc" })]) });
    expect(app(status)).toMatchObject({
      containerID: "containerd://abc",
      image: "docker.io/library/web:1",
      imageID: "sha256:web",
      state: { running: { startedAt: "2024-05-01T10:00:01Z" } },
      ready: true,
      started: true,
    });
  });

  test.each([
    ["Completed", 0, ""],
    ["Error", 1, ""],
    ["OOMKilled", 137, "OOMKilled"],
  ])("an exited container is terminated with reason %s", (reason, exitCode, runtimeReason) => {
    const pod = makePod({ restartPolicy: "Never" });
    const status = gen({
      pod,
      runtime: runtime([inst("web", "exited", { id: "x", exitCode, reason: runtimeReason })]),
    });
    expect(app(status).state.terminated).toEqual({
      exitCode,
      reason,
      startedAt: "2024-05-01T10:00:01Z",
      finishedAt: "2024-05-01T10:00:05Z",
      containerID: "containerd://x",
    });
  });

  test("a container to be restarted shows the last sync's failure, the exit as lastState", () => {
    const pod = makePod();
    const message = crashLoopMessage(20_000, "web", pod);
    const status = gen({
      pod,
      runtime: runtime([inst("web", "exited", { exitCode: 1, restartCount: 3 })]),
      syncErrors: new Map([["web", { reason: "CrashLoopBackOff", message }]]),
    });
    expect(message).toBe(
      "back-off 20s restarting failed container=web pod=web-node1_default(uid-1)",
    );
    expect(app(status)).toMatchObject({
      state: { waiting: { reason: "CrashLoopBackOff", message } },
      lastState: { terminated: { exitCode: 1, reason: "Error" } },
      restartCount: 3,
    });
  });

  test("an image pull failure shows as the waiting reason of a never-created container", () => {
    const status = gen({
      syncErrors: new Map([["web", { reason: "ErrImagePull", message: "not found" }]]),
    });
    expect(app(status).state).toEqual({
      waiting: { reason: "ErrImagePull", message: "not found" },
    });
  });

  test("a sync failure is ignored for a container that will not be restarted", () => {
    const status = gen({
      pod: makePod({ restartPolicy: "Never" }),
      runtime: runtime([inst("web", "exited", { exitCode: 1 })]),
      syncErrors: new Map([["web", { reason: "CrashLoopBackOff", message: "x" }]]),
    });
    expect(app(status).state.terminated?.reason).toBe("Error");
  });

  test("the previous instance gives lastState and the newest gives state and restartCount", () => {
    const status = gen({
      runtime: runtime([
        inst("web", "running", { id: "new", at: 30, restartCount: 2 }),
        inst("web", "exited", { id: "old", at: 10, exitCode: 2, restartCount: 1 }),
        inst("web", "exited", { id: "oldest", at: 0, exitCode: 3 }),
      ]),
    });
    expect(app(status)).toMatchObject({
      containerID: "containerd://new",
      restartCount: 2,
      state: { running: { startedAt: "2024-05-01T10:00:31Z" } },
      lastState: { terminated: { exitCode: 2, containerID: "containerd://old" } },
    });
  });

  test("a running container that vanished from the runtime counts as terminated with 137", () => {
    const previous = gen({ runtime: runtime([inst("web", "running", { restartCount: 4 })]) });
    const status = gen({ runtime: runtime([]), previous });
    expect(app(status)).toMatchObject({
      state: { waiting: { reason: "ContainerCreating" } },
      lastState: { terminated: { exitCode: 137, reason: "ContainerStatusUnknown" } },
      restartCount: 5,
    });
    expect(status.phase).toBe("Running");
  });

  test("a container in unknown state that was running is terminated ContainerStatusUnknown", () => {
    const previous = gen({ runtime: runtime([inst("web", "running", { restartCount: 1 })]) });
    const status = gen({
      runtime: runtime([inst("web", "unknown", { restartCount: 1 })]),
      previous,
    });
    expect(app(status)).toMatchObject({
      state: { terminated: { exitCode: 137, reason: "ContainerStatusUnknown" } },
      restartCount: 2,
    });
  });

  test("a terminated status is kept when the runtime no longer has the container", () => {
    const pod = makePod({ restartPolicy: "Never" });
    const previous = gen({ pod, runtime: runtime([inst("web", "exited", { exitCode: 3 })]) });
    const status = gen({ pod, runtime: runtime([]), previous });
    expect(app(status).state.terminated?.exitCode).toBe(3);
    expect(status.phase).toBe("Failed");
  });

  test("an init container removed after the app started is reported Completed", () => {
    const status = gen({
      pod: makePod({ initContainers: [ctr("init1")] }),
      runtime: runtime([inst("web", "running")]),
    });
    expect(initStatus(status, "init1")).toMatchObject({
      state: { terminated: { exitCode: 0, reason: "Completed" } },
      ready: true,
    });
  });

  test("a container with a startup probe is not started, nor ready, before it succeeds", () => {
    const probe = { exec: { command: ["true"] } };
    const pod = makePod({ containers: [ctr("web", { startupProbe: probe })] });
    const rt = runtime([inst("web", "running", { id: "c1" })]);
    const before = app(gen({ pod, runtime: rt, startup: () => undefined }));
    expect(before).toMatchObject({ started: false, ready: false });
    const after = app(gen({ pod, runtime: rt, startup: (id) => id === "c1" }));
    expect(after).toMatchObject({ started: true, ready: true });
  });

  test("a container with a readiness probe is ready only after a success", () => {
    const probe = { exec: { command: ["true"] } };
    const pod = makePod({ containers: [ctr("web", { readinessProbe: probe })] });
    const rt = runtime([inst("web", "running", { id: "c1" })]);
    expect(app(gen({ pod, runtime: rt })).ready).toBe(false);
    expect(app(gen({ pod, runtime: rt, readiness: () => false })).ready).toBe(false);
    expect(app(gen({ pod, runtime: rt, readiness: (id) => id === "c1" })).ready).toBe(true);
  });

  test("statuses follow spec order", () => {
    const pod = makePod({ containers: [ctr("zeta"), ctr("alpha")] });
    const status = gen({
      pod,
      runtime: runtime([inst("alpha", "running"), inst("zeta", "running")]),
    });
    expect(status.containerStatuses?.map((s) => s.name)).toEqual(["zeta", "alpha"]);
  });
});

describe("generatePodStatus() pod fields", () => {
  test("podIP comes from the sandbox, hostIP from the node", () => {
    const status = gen({ runtime: runtime([inst("web", "running")]) });
    expect(status).toMatchObject({
      hostIP: HOST,
      hostIPs: [{ ip: HOST }],
      podIP: "10.88.0.5",
      podIPs: [{ ip: "10.88.0.5" }],
    });
  });

  test("a host-network pod has the node's IP", () => {
    const status = gen({
      pod: makePod({ hostNetwork: true }),
      runtime: runtime([inst("web", "running")], [sandbox({ ips: [], hostNetwork: true })]),
    });
    expect(status.podIP).toBe(HOST);
  });

  test("startTime is set once and then kept", () => {
    const first = gen({ now: T0 });
    expect(first.startTime).toBe("2024-05-01T10:00:00Z");
    const later = gen({ now: T0 + 3_600_000, previous: first });
    expect(later.startTime).toBe("2024-05-01T10:00:00Z");
  });

  test("qosClass is computed from the spec unless given", () => {
    expect(gen({}).qosClass).toBe("BestEffort");
    expect(gen({ qosClass: "Guaranteed" }).qosClass).toBe("Guaranteed");
  });

  test("initContainerStatuses is absent for a pod without init containers", () => {
    expect(gen({}).initContainerStatuses).toBeUndefined();
  });
});
