// Builders for status tests: defaulted pods and runtime views with few keystrokes.

import type * as kc from "../../../src/agent/kubecontainer/types.ts";
import { applyPodDefaults } from "../../../src/api/defaults.ts";
import type { Container, Pod, RestartPolicy } from "../../../src/api/types.ts";

export const T0 = Date.UTC(2024, 4, 1, 10, 0, 0);
const UID = "uid-1";

export function ctr(name: string, extra: Partial<Container> = {}): Container {
  return { name, image: `${name}:1`, ...extra };
}

export interface PodOptions {
  containers?: Container[];
  initContainers?: Container[];
  restartPolicy?: RestartPolicy;
  hostNetwork?: boolean;
}

export function makePod(opts: PodOptions = {}): Pod {
  return applyPodDefaults({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "web-node1", namespace: "default", uid: UID },
    spec: {
      containers: opts.containers ?? [ctr("web")],
      ...(opts.initContainers ? { initContainers: opts.initContainers } : {}),
      ...(opts.restartPolicy ? { restartPolicy: opts.restartPolicy } : {}),
      ...(opts.hostNetwork ? { hostNetwork: true } : {}),
    },
  });
}

export function sandbox(extra: Partial<kc.SandboxStatus> = {}): kc.SandboxStatus {
  return {
    id: "sb1",
    state: "ready",
    createdAt: T0,
    attempt: 0,
    ips: ["10.88.0.5"],
    hostNetwork: false,
    ...extra,
  };
}

let seq = 0;

/** A runtime container; `at` is its creation time in seconds after T0. */
export function inst(
  name: string,
  state: kc.ContainerState,
  extra: Partial<kc.ContainerStatus> & { at?: number } = {},
): kc.ContainerStatus {
  const { at = 0, ...rest } = extra;
  const createdAt = T0 + at * 1000;
  return {
    id: `${name}-${++seq}`,
    name,
    state,
    createdAt,
    startedAt: state === "created" ? 0 : createdAt + 1000,
    finishedAt: state === "exited" ? createdAt + 5000 : 0,
    exitCode: 0,
    reason: "",
    message: "",
    image: `docker.io/library/${name}:1`,
    imageRef: `sha256:${name}`,
    hash: "h",
    restartCount: 0,
    sandboxId: "sb1",
    ...rest,
  };
}

export function runtime(
  containers: kc.ContainerStatus[],
  sandboxes: kc.SandboxStatus[] = [sandbox()],
): kc.PodStatus {
  return {
    uid: UID,
    name: "web-node1",
    namespace: "default",
    ips: sandboxes[0]?.ips ?? [],
    sandboxes,
    containers,
    timestamp: T0 + 60_000,
  };
}
