// The runtime's view of pods, rebuilt from CRI list/status calls alone (labels and annotations
// written at creation, see docs/runtime-contract.md). Produced by the runtime manager, cached by
// PLEG, read by computePodActions() and the status manager. Times are epoch milliseconds.

export type ContainerState = "created" | "running" | "exited" | "unknown";
export type SandboxState = "ready" | "notready";

/** One container of a pod as the runtime reports it. */
export interface ContainerStatus {
  /** CRI container ID. */
  id: string;
  /** The container's name in the pod spec (label io.kubernetes.container.name). */
  name: string;
  state: ContainerState;
  createdAt: number;
  /** 0 when never started. */
  startedAt: number;
  /** 0 while not finished. */
  finishedAt: number;
  exitCode: number;
  /** The runtime's reason, e.g. "OOMKilled", "Error", "Completed". */
  reason: string;
  message: string;
  /** The image as the spec named it. */
  image: string;
  /** The image's digest reference (status.imageID). */
  imageRef: string;
  /** Spec hash recorded at creation (annotation io.kubernetes.container.hash). */
  hash: string;
  /** Restart count recorded at creation (annotation io.kubernetes.container.restartCount). */
  restartCount: number;
  /** Grace period recorded at creation (annotation io.kubernetes.pod.terminationGracePeriod). */
  terminationGracePeriodSeconds?: number;
  /** Sandbox the container belongs to. */
  sandboxId: string;
}

/** One pod sandbox as the runtime reports it. */
export interface SandboxStatus {
  id: string;
  state: SandboxState;
  createdAt: number;
  /** metadata.attempt: how many sandboxes the pod had before this one. */
  attempt: number;
  /** Primary IP first; empty for host-network pods. */
  ips: string[];
  hostNetwork: boolean;
}

/** Everything the runtime knows of one pod, newest sandbox first, containers newest first. */
export interface PodStatus {
  uid: string;
  name: string;
  namespace: string;
  ips: string[];
  sandboxes: SandboxStatus[];
  containers: ContainerStatus[];
  /** When this status was read (the agent's monotonic ms: the PLEG cache orders reads by it,
   * and a wall step must not make a newer read look older). */
  timestamp: number;
}

/** The sandboxes and containers a sync created (by ID). */
export interface SyncChanges {
  sandboxes: string[];
  containers: { id: string; sandboxId: string }[];
}

/** A pod found in the runtime, possibly one the agent no longer knows (an orphan). */
export interface RunningPod {
  uid: string;
  name: string;
  namespace: string;
  /** Newest first. */
  sandboxes: { id: string; state: SandboxState }[];
  containers: { id: string; name: string; state: ContainerState }[];
}

/** Finds the newest status of the named container, if any. */
export function findContainer(status: PodStatus, name: string): ContainerStatus | undefined {
  let best: ContainerStatus | undefined;
  for (const c of status.containers) {
    if (c.name === name && (best === undefined || c.createdAt > best.createdAt)) best = c;
  }
  return best;
}
