// The state records of the fake runtime and the CRI objects it reports from them
// (copies, in the fully-populated shape the real client returns).

import type * as t from "./types.ts";

export interface FakeSandbox {
  id: string;
  config: t.PodSandboxConfig;
  state: t.PodSandboxState;
  /** ns */
  createdAt: number;
  ip: string;
  runtimeHandler: string;
}

export interface FakeContainer {
  id: string;
  podSandboxId: string;
  config: t.ContainerConfig;
  state: t.ContainerState;
  /** ns; startedAt and finishedAt are 0 until the container starts or exits. */
  createdAt: number;
  startedAt: number;
  finishedAt: number;
  exitCode: number;
  reason: string;
  message: string;
  imageRef: string;
  resources: t.LinuxContainerResources | null;
}

export function toPodSandbox(sb: FakeSandbox): t.PodSandbox {
  return {
    id: sb.id,
    metadata: structuredClone(sb.config.metadata),
    state: sb.state,
    createdAt: sb.createdAt,
    labels: { ...sb.config.labels },
    annotations: { ...sb.config.annotations },
    runtimeHandler: sb.runtimeHandler,
  };
}

export function toPodSandboxStatus(sb: FakeSandbox): t.PodSandboxStatus {
  const nsOptions = sb.config.linux?.securityContext?.namespaceOptions ?? null;
  return {
    ...toPodSandbox(sb),
    network: { ip: sb.ip, additionalIps: [] },
    linux: { namespaces: { options: structuredClone(nsOptions) } },
  };
}

export function toContainer(c: FakeContainer): t.Container {
  return {
    id: c.id,
    podSandboxId: c.podSandboxId,
    metadata: structuredClone(c.config.metadata),
    image: {
      annotations: {},
      userSpecifiedImage: "",
      runtimeHandler: "",
      imageRef: "",
      ...structuredClone(c.config.image),
    },
    imageRef: c.imageRef,
    imageId: "",
    state: c.state,
    createdAt: c.createdAt,
    labels: { ...c.config.labels },
    annotations: { ...c.config.annotations },
  };
}

/** logDirectory is the sandbox's: the log path is reported joined to it, as containerd does. */
export function toContainerStatus(c: FakeContainer, logDirectory: string): t.ContainerStatus {
  const logPath = c.config.logPath && logDirectory ? `${logDirectory}/${c.config.logPath}` : "";
  return {
    ...toContainer(c),
    startedAt: c.startedAt,
    finishedAt: c.finishedAt,
    exitCode: c.exitCode,
    reason: c.reason,
    message: c.message,
    mounts: structuredClone(c.config.mounts ?? []),
    logPath,
    resources: { linux: structuredClone(c.resources) },
    user: null,
  };
}
