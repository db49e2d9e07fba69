// The runtime manager: reads pods from the runtime and carries out computePodActions' plan.
// syncPod runs the plan's steps in order through a table typed over the step kinds; a step
// returns false to end the sync (kubelet's order: a failed kill, sandbox or init container
// stops it; a failed app container does not stop the others).
//
// Invariants:
// - syncPod, getPods and getPodStatus never start more than the plan says; they never throw
//   for a failure of one container: failures are returned as SyncErrors and waiting reasons.
// - Every CRI call has a deadline: lifecycle calls `runtimeRequestTimeoutMs` (+ the grace period
//   for StopContainer), queries the client's default, pulls the client's pull deadline.

import { randomBytes } from "node:crypto";
import type { Pod } from "../../api/types.ts";
import type { CallOptions, PodSandboxConfig } from "../../cri/index.ts";
import { HostFiles } from "../../util/host-file.ts";
import { type PriorityKey, PriorityLimiter } from "../../util/priority-limiter.ts";
import { createImageManager, podPullCredentials } from "../images/index.ts";
import type { PodStatus, RunningPod, SyncChanges } from "../kubecontainer/types.ts";
import { CONFIG_SEEN_ANNOTATION } from "../sources/parse.ts";
import {
  type Core,
  type RuntimeManagerDeps,
  START_SLOT_RELEASE_MS,
  type SyncError,
  type SyncRun,
  type WaitingReason,
} from "./core.ts";
import { CrashLoopBackoff } from "./crashloop.ts";
import type { EnvObjects } from "./env.ts";
import { errorMessage } from "./format.ts";
import {
  killContainer,
  killPod,
  removeContainer,
  removePod,
  removeSandbox,
  runningPodOf,
} from "./kill.ts";
import { computePodActions } from "./plan.ts";
import { createSandbox, sandboxConfigFor } from "./sandbox.ts";
import { startContainer } from "./start.ts";
import { listRunningPods, readPodStatus, readPodStatusAfter } from "./status.ts";
import { planSteps, type SyncStep, type SyncStepKind } from "./steps.ts";

interface SyncPodOptions {
  /** Ids of containers failing their liveness probe (from the prober). */
  livenessFailed?: ReadonlySet<string>;
  /** Ids of containers failing their startup probe. */
  startupFailed?: ReadonlySet<string>;
  /** Aborts pulls and lifecycle calls in flight. */
  signal?: AbortSignal;
  /** Called with a container's waiting message while its image is pulled. */
  onPullProgress?: (container: string, message: string) => void;
}

interface SyncPodResult {
  errors: SyncError[];
  /** Why containers that should run do not, by container name (for the status manager). */
  waiting: Map<string, WaitingReason>;
  /** What the sync created and removed (see getPodStatusAfter). */
  changes: SyncChanges;
}

export interface RuntimeManager {
  /** Every pod fleetlet has objects of in the runtime (io.fleetlet.managed=true), by UID. */
  getPods(): Promise<RunningPod[]>;
  /** Everything the runtime has of one pod, rebuilt from labels and annotations. */
  getPodStatus(uid: string, name: string, namespace: string): Promise<PodStatus>;
  /** The pod's status after a sync that planned from `before` and made `changes`: what the
   * sync touched is read again, the rest taken from `before` (fewer calls than getPodStatus). */
  getPodStatusAfter(before: PodStatus, changes: SyncChanges): Promise<PodStatus>;
  /** Computes the pod's actions from `status` and carries them out. Never throws. */
  syncPod(pod: Pod, status: PodStatus | undefined, opts?: SyncPodOptions): Promise<SyncPodResult>;
  /** Runs preStop hooks and stops the pod's containers (in parallel), then its sandboxes.
   * `pod` undefined: an orphan, stopped from what its annotations recorded. Throws naming what
   * could not be stopped. */
  killPod(
    pod: Pod | undefined,
    running: RunningPod,
    gracePeriodOverrideSeconds?: number,
  ): Promise<void>;
  /** Removes the (stopped) pod's containers, sandboxes and log folder. */
  removePod(running: RunningPod): Promise<void>;
  /** Removes a dead container and its log files, the current and the rotated ones; resolves to
   * the bytes of logs removed. A container already gone is not an error. */
  removeContainer(containerId: string): Promise<number>;
  /** Stops a container the agent may know nothing of, with the grace period its annotations
   * recorded (and its preStop hook); `message` is the Killing event's. */
  stopContainer(containerId: string, name: string, message: string): Promise<void>;
  /** Stops (if needed) and removes a sandbox; one already gone is not an error. */
  removeSandbox(sandboxId: string): Promise<void>;
  /** Forgets back-off entries that expired. */
  gc(): void;
  /** Runs a new pod's own preparation (its folder, its cgroup) in the start order of
   * maxParallelStarts, a few pods at a time, so that in a burst the first pods reach the
   * runtime first; rejects if `signal` aborts while it waits. */
  prepareInTurn(pod: Pod, prepare: () => Promise<void>, signal?: AbortSignal): Promise<void>;
}

type StepHandler<K extends SyncStepKind> = (
  step: Extract<SyncStep, { kind: K }>,
  run: SyncRun,
  sandboxConfig: (attempt?: number) => Promise<PodSandboxConfig>,
) => Promise<boolean>;

async function killPodStep(core: Core, step: { createSandboxAfter: boolean }, run: SyncRun) {
  if (step.createSandboxAfter && run.sandboxId) {
    const message = "Pod sandbox changed, it will be killed and re-created.";
    core.event(run.pod, "Normal", "SandboxChanged", message);
  }
  if (!run.status) return true;
  try {
    await killPod(core, run.pod, runningPodOf(run.status), undefined, run.podIPs);
    return true;
  } catch (err) {
    run.errors.push({
      action: "killPod",
      target: run.pod.metadata.name,
      reason: "KillPodError",
      message: errorMessage(err),
    });
    return false;
  }
}

function stepTable(core: Core): { [K in SyncStepKind]: StepHandler<K> } {
  return {
    killPod: (step, run) => killPodStep(core, step, run),
    killContainer: async (step, run) => {
      try {
        await killContainer(core, run.pod, step, { podIPs: run.podIPs });
        return true;
      } catch (err) {
        const message = errorMessage(err);
        run.errors.push({
          action: "killContainer",
          target: step.name,
          reason: "KillContainerError",
          message,
        });
        return false;
      }
    },
    createSandbox: (step, run, sandboxConfig) =>
      createSandbox(core, run, step.attempt, sandboxConfig),
    startInitContainer: async (step, run, sandboxConfig) => {
      const container = run.pod.spec.initContainers?.[step.index];
      if (!container) return false;
      const spec = { container, isInit: true, sandboxConfig: await sandboxConfig() };
      const ok = await startContainer(core, run, spec);
      return ok || container.restartPolicy === "Always";
    },
    startContainer: async (step, run, sandboxConfig) => {
      const container = run.pod.spec.containers[step.index];
      if (!container) return true;
      await startContainer(core, run, {
        container,
        isInit: false,
        sandboxConfig: await sandboxConfig(),
      });
      return true;
    },
  };
}

/** A queue in start order, with maxParallelStarts slots. */
function startQueue(deps: RuntimeManagerDeps): PriorityLimiter {
  return new PriorityLimiter(deps.maxParallelStarts ?? 0, deps.clock, START_SLOT_RELEASE_MS);
}

function makeCore(deps: RuntimeManagerDeps): Core {
  const starts = startQueue(deps);
  const core: Core = {
    deps,
    images:
      deps.images ??
      createImageManager({
        cri: deps.cri,
        clock: deps.clock,
        logger: deps.logger,
        recorder: deps.recorder,
        backoff: deps.imagePullBackOff,
        ...(deps.credentials ? { credentialsPath: deps.credentials } : {}),
        ...(deps.imagePulls && { pulls: deps.imagePulls }),
        ...(deps.pullProgress && { pullProgress: deps.pullProgress }),
        ...(deps.pullLeases && { pullLeases: deps.pullLeases }),
        ...(deps.objects && { podCredentials: podCredentialsFrom(deps.objects) }),
      }),
    crashLoop: new CrashLoopBackoff(deps.crashLoopBackOff, deps.clock),
    hostFiles: new HostFiles(),
    startCall: (pod, call, signal) => starts.run(startKey(pod), call, signal),
    lifecycle(extraMs = 0, signal?: AbortSignal): CallOptions {
      const opts: CallOptions = { timeoutMs: deps.runtimeRequestTimeoutMs + extraMs };
      if (signal) opts.signal = signal;
      return opts;
    },
    event(pod, type, reason, message, fieldPath) {
      try {
        deps.recorder(pod, type, reason, message, fieldPath);
      } catch (err) {
        deps.logger.warn("event recorder failed", { reason, error: errorMessage(err) });
      }
    },
    nodeIP: () => deps.nodeIP?.() ?? "",
    random: deps.random ?? (() => randomBytes(4).toString("hex")),
  };
  return core;
}

/** The credentials of a pod's imagePullSecrets, from the object store. */
function podCredentialsFrom(objects: EnvObjects) {
  return (pod: Pod) => podPullCredentials(pod, (ns, name) => objects.secret(ns, name));
}

/** A pod's place in the queue of start calls: when its source first saw it, then its name. */
function startKey(pod: Pod): PriorityKey {
  const seen = Date.parse(pod.metadata.annotations?.[CONFIG_SEEN_ANNOTATION] ?? "");
  return {
    at: Number.isNaN(seen) ? Number.MAX_SAFE_INTEGER : seen,
    name: `${pod.metadata.namespace ?? ""}/${pod.metadata.name}`,
  };
}

export function createRuntimeManager(deps: RuntimeManagerDeps): RuntimeManager {
  return new GenericRuntimeManager(deps);
}

/** The kubelet's kubeGenericRuntimeManager: reads pods from the runtime, carries out plans. */
class GenericRuntimeManager implements RuntimeManager {
  /** What every step and kill reads: deps, image manager, crash-loop back-off, host files. */
  private readonly core: Core;
  /** The handler of each kind of sync step. */
  private readonly table: { [K in SyncStepKind]: StepHandler<K> };
  /** The start-order queue of new pods' own preparations (prepareInTurn). */
  private readonly preparations: PriorityLimiter;

  constructor(private readonly deps: RuntimeManagerDeps) {
    this.core = makeCore(deps);
    this.table = stepTable(this.core);
    this.preparations = startQueue(deps);
  }

  getPods(): Promise<RunningPod[]> {
    return listRunningPods(this.deps.cri, undefined, this.deps.nodeName);
  }

  getPodStatus(uid: string, name: string, namespace: string): Promise<PodStatus> {
    return readPodStatus(this.deps.cri, { uid, name, namespace }, this.deps.clock.monotonic());
  }

  getPodStatusAfter(before: PodStatus, changes: SyncChanges): Promise<PodStatus> {
    return readPodStatusAfter(this.deps.cri, before, changes, this.deps.clock.monotonic());
  }

  async syncPod(
    pod: Pod,
    status: PodStatus | undefined,
    opts: SyncPodOptions = {},
  ): Promise<SyncPodResult> {
    const actions = computePodActions(pod, status, opts);
    const run: SyncRun = {
      pod,
      status,
      sandboxId: actions.sandboxId,
      attempt: actions.attempt,
      podIPs: status?.ips ?? [],
      errors: [],
      waiting: new Map(),
      changes: { sandboxes: [], containers: [] },
      ...(opts.signal ? { signal: opts.signal } : {}),
      ...(opts.onPullProgress && { onPullProgress: opts.onPullProgress }),
    };
    let config: PodSandboxConfig | undefined;
    // One sandbox config per sync (per attempt): the new sandbox and its containers share it.
    const sandboxConfig = async (attempt = run.attempt) => {
      if (config?.metadata?.attempt !== attempt)
        config = await sandboxConfigFor(this.core, pod, attempt);
      return config;
    };
    try {
      for (const step of planSteps(actions)) {
        if (!(await this.runStep(step, run, sandboxConfig))) break;
      }
    } catch (err) {
      run.errors.push({
        action: "startContainer",
        target: pod.metadata.name,
        reason: "SyncError",
        message: `Cannot sync pod ${JSON.stringify(pod.metadata.name)}: ${errorMessage(err)}`,
      });
    }
    return { errors: run.errors, waiting: run.waiting, changes: run.changes };
  }

  killPod(
    pod: Pod | undefined,
    running: RunningPod,
    gracePeriodOverrideSeconds?: number,
  ): Promise<void> {
    return killPod(this.core, pod, running, gracePeriodOverrideSeconds);
  }

  removePod(running: RunningPod): Promise<void> {
    return removePod(this.core, running);
  }

  removeContainer(containerId: string): Promise<number> {
    return removeContainer(this.core, containerId);
  }

  stopContainer(containerId: string, name: string, message: string): Promise<void> {
    return killContainer(this.core, undefined, { containerId, name, reason: "Unknown", message });
  }

  removeSandbox(sandboxId: string): Promise<void> {
    return removeSandbox(this.core, sandboxId);
  }

  gc(): void {
    this.core.crashLoop.gc();
    this.core.images.gc();
  }

  /** Bound: the pod sync is given this method alone. */
  readonly prepareInTurn = (
    pod: Pod,
    prepare: () => Promise<void>,
    signal?: AbortSignal,
  ): Promise<void> => this.preparations.run(startKey(pod), prepare, signal);

  /** Runs one step; false ends the sync. */
  private runStep(
    step: SyncStep,
    run: SyncRun,
    cfg: (attempt?: number) => Promise<PodSandboxConfig>,
  ): Promise<boolean> {
    return (this.table[step.kind] as StepHandler<SyncStepKind>)(step as never, run, cfg);
  }
}
