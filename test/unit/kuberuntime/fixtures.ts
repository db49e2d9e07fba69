// Builders of the runtime's view of a pod (kubecontainer PodStatus) for runtime manager tests.

import type {
  ContainerState,
  ContainerStatus,
  PodStatus,
  SandboxStatus,
} from "../../../src/agent/kubecontainer/types.ts";
import { hashContainer } from "../../../src/agent/kuberuntime/index.ts";
import type { Pod } from "../../../src/api/types.ts";

export const T0 = Date.UTC(2024, 4, 1, 10, 0, 0);

export function sandbox(o: Partial<SandboxStatus> = {}): SandboxStatus {
  return {
    id: "sb1",
    state: "ready",
    createdAt: T0,
    attempt: 0,
    ips: ["10.99.0.5"],
    hostNetwork: false,
    ...o,
  };
}

/** An instance of the pod's container `name` with the spec's hash unless overridden. */
export function instance(
  pod: Pod,
  name: string,
  state: ContainerState,
  o: Partial<ContainerStatus> = {},
): ContainerStatus {
  const spec = [...pod.spec.containers, ...(pod.spec.initContainers ?? [])].find(
    (c) => c.name === name,
  );
  return {
    id: `${name}-${o.createdAt ?? T0}`,
    name,
    state,
    createdAt: T0,
    startedAt: state === "created" ? 0 : T0,
    finishedAt: state === "exited" ? T0 + 1000 : 0,
    exitCode: 0,
    reason: state === "exited" ? "Completed" : "",
    message: "",
    image: spec?.image ?? "busybox",
    imageRef: "sha256:abc",
    hash: spec ? hashContainer(spec) : "0",
    restartCount: 0,
    sandboxId: "sb1",
    ...o,
  };
}

export function exited(pod: Pod, name: string, exitCode: number, o: Partial<ContainerStatus> = {}) {
  return instance(pod, name, "exited", {
    exitCode,
    reason: exitCode === 0 ? "Completed" : "Error",
    ...o,
  });
}

export function podStatus(
  pod: Pod,
  containers: ContainerStatus[],
  sandboxes: SandboxStatus[] = [sandbox()],
): PodStatus {
  const latest = sandboxes[0];
  return {
    uid: pod.metadata.uid ?? "",
    name: pod.metadata.name,
    namespace: pod.metadata.namespace ?? "default",
    ips: latest?.state === "ready" ? latest.ips : [],
    sandboxes,
    containers,
    timestamp: T0,
  };
}
