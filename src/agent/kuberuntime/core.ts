// The runtime manager's dependencies and the state shared by its parts (kill.ts, start.ts,
// sandbox.ts, executor.ts). Created once per manager by createRuntimeManager().

import type { NodeAllocatable } from "../../api/index.ts";
import type { Container, Pod } from "../../api/types.ts";
import type { CallOptions, CriRuntime } from "../../cri/index.ts";
import type { Clock } from "../../util/clock.ts";
import type { HostFiles } from "../../util/host-file.ts";
import type { Logger } from "../../util/log.ts";
import type { ContainerAllocation } from "../cm/devicemanager/index.ts";
import type {
  ImageManager,
  PodEventRecorder,
  PullLeases,
  PullProgressSource,
  PullSettings,
} from "../images/index.ts";
import type { ContainerStatus, PodStatus, SyncChanges } from "../kubecontainer/types.ts";
import type { CrashLoopBackoff } from "./crashloop.ts";
import type { EnvObjects } from "./env.ts";
import type { ContainerVolumes } from "./mounts.ts";
import type { SyncStepKind } from "./steps.ts";

interface BackoffSettings {
  initialMs: number;
  maxMs: number;
}

export interface RuntimeManagerDeps {
  cri: CriRuntime;
  clock: Clock;
  logger: Logger;
  /** Records a Kubernetes event about `pod` (fieldPath names a container). */
  recorder: PodEventRecorder;
  /** Container logs go under <podLogsDir>/<namespace>_<name>_<uid>/ (default /var/log/pods). */
  podLogsDir: string;
  /** The agent's root dir: pod folders, emptyDir volumes, hosts and termination files. */
  rootDir: string;
  nodeName: string;
  /** The node's IP: status.hostIP in env, the pod IP of host-network pods. */
  nodeIP?: () => string;
  /** Node memory capacity in bytes, for the oom_score_adj of Burstable containers. */
  nodeMemoryBytes: number;
  /** The pod's cgroup, given to the runtime as the sandbox's cgroup parent ("" or absent: none). */
  podCgroupParent?: (pod: Pod) => string;
  /** The CPU manager's cpuset of a container ("" or absent: the runtime's default). */
  cpusetFor?: (pod: Pod, c: Container) => string;
  /** kubelet: 10 s doubling to 300 s. */
  crashLoopBackOff: BackoffSettings;
  /** kubelet: 10 s doubling to 300 s. */
  imagePullBackOff: BackoffSettings;
  /** A docker config.json with registry credentials. */
  credentials?: string;
  /** How many image pulls at once and how fast they may begin (absent: one at a time, no rate
   * limit). */
  imagePulls?: PullSettings;
  /** The runtime's downloads in progress, for pull progress and the progress deadline (absent:
   * pulls are not watched). */
  pullProgress?: PullProgressSource;
  /** Pulls under a lease per image, so that a failed attempt's downloads stay for the next
   * (absent: PullImage as it is). */
  pullLeases?: PullLeases;
  /** The pod's volumes as containers mount them (the volume manager). */
  volumes: ContainerVolumes;
  /** The ConfigMaps and Secrets env and imagePullSecrets read (absent: none). */
  objects?: EnvObjects;
  /** What a container's devices add to its config (the device manager), after the plugins'
   * PreStartContainer; absent: no devices. */
  devices?: {
    containerOptions(
      pod: Pod,
      c: Container,
      signal?: AbortSignal,
    ): Promise<ContainerAllocation | undefined>;
  };
  /** The node's allocatable, for resourceFieldRef of a container with no limit. */
  allocatable?: () => NodeAllocatable;
  /** Deadline of sandbox and container lifecycle calls (kubelet: 2 min). */
  runtimeRequestTimeoutMs: number;
  /** The host's resolv.conf (default /etc/resolv.conf); "" for none. */
  resolvConfPath?: string;
  /** The host's hosts file, copied for host-network pods (default /etc/hosts). */
  hostsPath?: string;
  /** Longest run of a postStart hook (default: runtimeRequestTimeoutMs). */
  postStartTimeoutMs?: number;
  /** Random 8-hex-digit names (termination message files); injected for tests. */
  random?: () => string;
  /** Replaces the image manager built from the deps (tests). */
  images?: ImageManager;
  /** RunPodSandbox, CreateContainer and StartContainer calls in flight at once, the pods seen
   * first going first (0 or absent: no limit, as the kubelet). */
  maxParallelStarts?: number;
}

/** A start call that takes longer than this gives its slot to the next one. */
export const START_SLOT_RELEASE_MS = 10_000;

/** A failure of one step of a sync; the pod worker logs these and retries later. */
export interface SyncError {
  action: SyncStepKind;
  /** The container name, or the pod's name for pod-level steps. */
  target: string;
  /** kubelet's reason, e.g. "ErrImagePull", "CrashLoopBackOff", "CreatePodSandboxError". */
  reason: string;
  /** What failed and the value, e.g. `Cannot start container "web" of pod "cam-dev1": ...`. */
  message: string;
}

/** Why a container that should run does not (shown as its waiting state). */
export interface WaitingReason {
  reason: string;
  message: string;
}

export interface Core {
  deps: RuntimeManagerDeps;
  images: ImageManager;
  crashLoop: CrashLoopBackoff;
  /** The host's resolv.conf and hosts file, read once per change. */
  hostFiles: HostFiles;
  /** Runs a start call (RunPodSandbox, CreateContainer, StartContainer) of `pod` within
   * maxParallelStarts, the pod seen first going first; rejects if `signal` aborts first. */
  startCall<T>(pod: Pod, call: () => Promise<T>, signal?: AbortSignal): Promise<T>;
  /** Options of a lifecycle call (deadline, optionally extended by `extraMs`). */
  lifecycle(extraMs?: number, signal?: AbortSignal): CallOptions;
  event(
    pod: Pod,
    type: "Normal" | "Warning",
    reason: string,
    message: string,
    fieldPath?: string,
  ): void;
  nodeIP(): string;
  random(): string;
}

/** The state of one syncPod call, threaded through its steps. */
export interface SyncRun {
  pod: Pod;
  status: PodStatus | undefined;
  sandboxId: string;
  attempt: number;
  podIPs: string[];
  errors: SyncError[];
  waiting: Map<string, WaitingReason>;
  signal?: AbortSignal;
  /** Called with a container's waiting message while its image is pulled (its figures). */
  onPullProgress?: (container: string, message: string) => void;
  /** What the sync created and removed, for the status read after it. */
  changes: SyncChanges;
}

/** The newest instance of the named container in `status`. */
export function newestInstance(
  status: PodStatus | undefined,
  name: string,
): ContainerStatus | undefined {
  let best: ContainerStatus | undefined;
  for (const c of status?.containers ?? []) {
    if (c.name === name && (best === undefined || c.createdAt > best.createdAt)) best = c;
  }
  return best;
}
