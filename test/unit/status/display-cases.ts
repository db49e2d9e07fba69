// Pods and the STATUS / READY / RESTARTS that `get pods` shows for them, shared by the tests of
// the CLI's columns (display.test.ts) and of the dashboard's model, which must agree.
import type { PodDisplay } from "../../../src/agent/status/index.ts";
import type {
  ContainerState,
  ContainerStatus,
  Pod,
  PodCondition,
  PodPhase,
} from "../../../src/api/types.ts";
import { ctr, makePod } from "./builders.ts";

function cs(
  name: string,
  state: ContainerState,
  extra: Partial<ContainerStatus> = {},
): ContainerStatus {
  return {
    name,
    state,
    lastState: {},
    ready: false,
    restartCount: 0,
    image: "",
    imageID: "",
    ...extra,
  };
}

const running: ContainerState = { running: { startedAt: "2024-05-01T10:00:00Z" } };
const waiting = (reason: string): ContainerState => ({ waiting: { reason } });
const terminated = (exitCode: number, reason?: string): ContainerState => ({
  terminated: { exitCode, ...(reason ? { reason } : {}) },
});

export interface DisplayCase {
  name: string;
  phase: PodPhase;
  /** status.reason */
  reason?: string;
  init?: ContainerStatus[];
  app: ContainerStatus[];
  containers?: string[];
  initContainers?: string[];
  conditions?: PodCondition[];
  deleted?: boolean;
  want: Partial<PodDisplay>;
}

export const cases: DisplayCase[] = [
  {
    name: "Running with every container ready",
    phase: "Running",
    app: [cs("web", running, { ready: true })],
    want: { status: "Running", ready: "1/1" },
  },
  {
    name: "ContainerCreating before the first start",
    phase: "Pending",
    app: [cs("web", waiting("ContainerCreating"))],
    want: { status: "ContainerCreating", ready: "0/1" },
  },
  {
    name: "Init:0/1 while the first init container runs",
    phase: "Pending",
    initContainers: ["init1"],
    init: [cs("init1", running)],
    app: [cs("web", waiting("PodInitializing"))],
    want: { status: "Init:0/1" },
  },
  {
    name: "Init:1/2 once the first init container completed",
    phase: "Pending",
    initContainers: ["init1", "init2"],
    init: [cs("init1", terminated(0, "Completed")), cs("init2", waiting("PodInitializing"))],
    app: [cs("web", waiting("PodInitializing"))],
    want: { status: "Init:1/2" },
  },
  {
    name: "Init:Error when an init container failed",
    phase: "Failed",
    initContainers: ["init1"],
    init: [cs("init1", terminated(1, "Error"))],
    app: [cs("web", waiting("PodInitializing"))],
    want: { status: "Init:Error" },
  },
  {
    name: "Init:ExitCode:3 when the failure has no reason",
    phase: "Failed",
    initContainers: ["init1"],
    init: [cs("init1", terminated(3))],
    app: [cs("web", waiting("PodInitializing"))],
    want: { status: "Init:ExitCode:3" },
  },
  {
    name: "Init:CrashLoopBackOff with the init container's restarts",
    phase: "Pending",
    initContainers: ["init1"],
    init: [cs("init1", waiting("CrashLoopBackOff"), { restartCount: 4 })],
    app: [cs("web", waiting("PodInitializing"))],
    want: { status: "Init:CrashLoopBackOff", restarts: 4 },
  },
  {
    name: "PodInitializing once init containers completed",
    phase: "Pending",
    initContainers: ["init1"],
    init: [cs("init1", terminated(0, "Completed"))],
    app: [cs("web", waiting("PodInitializing"))],
    want: { status: "PodInitializing" },
  },
  {
    name: "CrashLoopBackOff with restarts and the last restart time",
    phase: "Running",
    app: [
      cs("web", waiting("CrashLoopBackOff"), {
        restartCount: 5,
        lastState: {
          terminated: { exitCode: 1, reason: "Error", finishedAt: "2024-05-01T10:05:00Z" },
        },
      }),
    ],
    want: { status: "CrashLoopBackOff", restarts: 5, lastRestart: "2024-05-01T10:05:00Z" },
  },
  {
    name: "Completed when the container exited 0",
    phase: "Succeeded",
    app: [cs("web", terminated(0, "Completed"))],
    want: { status: "Completed", ready: "0/1" },
  },
  {
    name: "Error when the container failed",
    phase: "Failed",
    app: [cs("web", terminated(1, "Error"))],
    want: { status: "Error" },
  },
  {
    name: "OOMKilled from the terminated reason",
    phase: "Running",
    app: [cs("web", terminated(137, "OOMKilled"))],
    want: { status: "OOMKilled" },
  },
  {
    name: "Running when one container completed and another runs in a Ready pod",
    phase: "Running",
    containers: ["job", "web"],
    app: [cs("job", terminated(0, "Completed")), cs("web", running, { ready: true })],
    conditions: [{ type: "Ready", status: "True" }],
    want: { status: "Running", ready: "1/2" },
  },
  {
    name: "NotReady when one container completed and the pod is not Ready",
    phase: "Running",
    containers: ["web", "job"],
    app: [cs("web", running, { ready: true }), cs("job", terminated(0, "Completed"))],
    conditions: [{ type: "Ready", status: "False" }],
    want: { status: "NotReady", ready: "1/2" },
  },
  {
    name: "a started sidecar counts as a container and its readiness",
    phase: "Running",
    initContainers: ["proxy"],
    init: [cs("proxy", running, { started: true, ready: true, restartCount: 1 })],
    app: [cs("web", running, { ready: true })],
    conditions: [{ type: "Initialized", status: "True" }],
    want: { status: "Running", ready: "2/2", restarts: 1 },
  },
  {
    name: "Terminating while deleted",
    phase: "Running",
    app: [cs("web", running, { ready: true })],
    deleted: true,
    want: { status: "Terminating" },
  },
  {
    name: "Evicted, whatever its containers' last reason (fleetlet's rule)",
    phase: "Failed",
    reason: "Evicted",
    app: [cs("web", terminated(137, "Error"))],
    want: { status: "Evicted", ready: "0/1" },
  },
  {
    name: "a rejected pod shows its reason (no container statuses)",
    phase: "Failed",
    reason: "OutOfcpu",
    app: [],
    want: { status: "OutOfcpu", ready: "0/1" },
  },
  {
    name: "a deleted pod that finished shows its phase",
    phase: "Succeeded",
    app: [cs("web", terminated(0, "Completed"))],
    deleted: true,
    want: { status: "Completed" },
  },
];

export function podFor(c: DisplayCase): Pod {
  const pod = makePod({
    containers: (c.containers ?? ["web"]).map((n) => ctr(n)),
    ...(c.initContainers
      ? {
          initContainers: c.initContainers.map((n) =>
            ctr(n, n === "proxy" ? { restartPolicy: "Always" } : {}),
          ),
        }
      : {}),
  });
  if (c.deleted) pod.metadata.deletionTimestamp = "2024-05-01T11:00:00Z";
  pod.status = {
    phase: c.phase,
    ...(c.reason ? { reason: c.reason } : {}),
    ...(c.conditions ? { conditions: c.conditions } : {}),
    ...(c.init ? { initContainerStatuses: c.init } : {}),
    containerStatuses: c.app,
  };
  return pod;
}
