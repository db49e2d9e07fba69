// Stopping and removing: killContainer (preStop hook within the grace period, then
// StopContainer with what is left, at least 2 s), killPod (containers in parallel, then every
// sandbox), removeContainer (with its log files), removeSandbox and removePod (everything of a
// pod, and its log folder). Dead containers of live pods are left to the container GC.
//
// Grace period, as kubelet: the pod's deletionGracePeriodSeconds, else the probe's
// terminationGracePeriodSeconds when killed for a failed liveness/startup probe, else
// spec.terminationGracePeriodSeconds; for an orphan (no pod), the grace period recorded in the
// container's annotations; an override (hard eviction) replaces all of these.

import { rm } from "node:fs/promises";
import type { Container, LifecycleHandler, Pod } from "../../api/types.ts";
import { isNotFound } from "../../cri/index.ts";
import type { PodStatus, RunningPod } from "../kubecontainer/types.ts";
import { removeContainerLogs } from "../logs/index.ts";
import type { Core } from "./core.ts";
import { errorMessage, fieldPathOf, findContainerSpec } from "./format.ts";
import { runHook } from "./hooks.ts";
import {
  LABEL_CONTAINER_NAME,
  LABEL_POD_NAME,
  LABEL_POD_NAMESPACE,
  LABEL_POD_UID,
  readContainerAnnotations,
} from "./labels.ts";
import type { KillReason } from "./plan.ts";
import { podLogDirectory } from "./sandbox-config.ts";

const MIN_GRACE_PERIOD_SECONDS = 2;

export interface KillTarget {
  containerId: string;
  name: string;
  reason: KillReason;
  /** The Killing event's message; "Stopping container <name>" when empty. */
  message: string;
}

interface KillSpec {
  pod: Pod;
  container: Container;
  isInit: boolean;
  graceSeconds: number;
}

function graceFor(pod: Pod, c: Container, reason: KillReason): number {
  if (pod.metadata.deletionGracePeriodSeconds !== undefined)
    return pod.metadata.deletionGracePeriodSeconds;
  const probe =
    reason === "LivenessProbe"
      ? c.livenessProbe
      : reason === "StartupProbe"
        ? c.startupProbe
        : undefined;
  if (probe?.terminationGracePeriodSeconds !== undefined)
    return probe.terminationGracePeriodSeconds;
  return pod.spec.terminationGracePeriodSeconds ?? MIN_GRACE_PERIOD_SECONDS;
}

/** Pod and container rebuilt from a container's labels and annotations (orphans). */
async function restoreSpec(core: Core, containerId: string): Promise<KillSpec> {
  const res = await core.deps.cri.containerStatus({ containerId });
  const s = res.status;
  if (!s) throw new Error(`container ${containerId} has no status`);
  const info = readContainerAnnotations(s.annotations);
  const pod: Pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: s.labels[LABEL_POD_NAME] ?? "",
      namespace: s.labels[LABEL_POD_NAMESPACE] ?? "",
      uid: s.labels[LABEL_POD_UID] ?? "",
    },
    spec: { containers: [], terminationGracePeriodSeconds: info.terminationGracePeriodSeconds },
  };
  const container: Container = { name: s.labels[LABEL_CONTAINER_NAME] ?? "", image: "" };
  if (info.preStop) container.lifecycle = { preStop: info.preStop };
  if (info.ports) container.ports = info.ports;
  return {
    pod,
    container,
    isInit: false,
    graceSeconds: info.terminationGracePeriodSeconds ?? MIN_GRACE_PERIOD_SECONDS,
  };
}

async function runPreStop(
  core: Core,
  spec: KillSpec,
  handler: LifecycleHandler,
  id: string,
  podIPs: string[],
): Promise<number> {
  const started = core.deps.clock.now();
  const result = await runHook(handler, {
    cri: core.deps.cri,
    clock: core.deps.clock,
    containerId: id,
    pod: spec.pod,
    container: spec.container,
    defaultHost: spec.pod.spec.hostNetwork ? "127.0.0.1" : (podIPs[0] ?? ""),
    timeoutMs: spec.graceSeconds * 1000,
  });
  if (!result.ok) {
    core.event(
      spec.pod,
      "Warning",
      "FailedPreStopHook",
      result.message,
      fieldPathOf(spec.container.name, spec.isInit),
    );
  }
  return Math.floor((core.deps.clock.now() - started) / 1000);
}

/** Stops one container; resolves when it stopped (or was already gone). */
export async function killContainer(
  core: Core,
  pod: Pod | undefined,
  target: KillTarget,
  opts: { graceOverrideSeconds?: number; podIPs?: string[]; running?: boolean } = {},
): Promise<void> {
  let spec: KillSpec;
  const ref = pod ? findContainerSpec(pod, target.name) : undefined;
  if (pod && ref) {
    spec = {
      pod,
      container: ref.container,
      isInit: ref.isInit,
      graceSeconds: graceFor(pod, ref.container, target.reason),
    };
  } else {
    try {
      spec = await restoreSpec(core, target.containerId);
    } catch (err) {
      if (isNotFound(err)) return;
      throw err;
    }
  }
  const fieldPath = fieldPathOf(spec.container.name, spec.isInit);
  core.event(
    spec.pod,
    "Normal",
    "Killing",
    target.message || `Stopping container ${target.name}`,
    fieldPath,
  );
  let grace = spec.graceSeconds;
  const preStop = spec.container.lifecycle?.preStop;
  if (preStop && grace > 0 && opts.running !== false) {
    grace -= await runPreStop(core, spec, preStop, target.containerId, opts.podIPs ?? []);
  }
  grace = Math.max(grace, MIN_GRACE_PERIOD_SECONDS);
  if (opts.graceOverrideSeconds !== undefined) grace = opts.graceOverrideSeconds;
  try {
    await core.deps.cri.stopContainer(
      { containerId: target.containerId, timeout: grace },
      core.lifecycle(grace * 1000),
    );
  } catch (err) {
    if (isNotFound(err)) return;
    throw new Error(
      `Cannot stop container "${target.name}" of pod "${spec.pod.metadata.name}": ${errorMessage(err)}`,
    );
  }
}

/** The running part of a status: non-exited containers and every sandbox. */
export function runningPodOf(status: PodStatus): RunningPod {
  return {
    uid: status.uid,
    name: status.name,
    namespace: status.namespace,
    sandboxes: status.sandboxes.map((s) => ({ id: s.id, state: s.state })),
    containers: status.containers
      .filter((c) => c.state !== "exited")
      .map((c) => ({ id: c.id, name: c.name, state: c.state })),
  };
}

/**
 * Stops the pod's containers (in parallel), then its sandboxes; throws naming what failed. A
 * sandbox that was not ready (its processes are gone) and cannot be stopped does not fail the
 * kill: nothing of the pod runs in it. It is reported (a FailedKillPod event when the pod is
 * known, and a log line) and left to the container GC, which removes it once it can be stopped.
 */
export async function killPod(
  core: Core,
  pod: Pod | undefined,
  running: RunningPod,
  graceOverrideSeconds?: number,
  podIPs: string[] = [],
): Promise<void> {
  const live = running.containers.filter((c) => c.state !== "exited");
  const results = await Promise.allSettled(
    live.map((c) =>
      killContainer(
        core,
        pod,
        { containerId: c.id, name: c.name, reason: "", message: "" },
        {
          podIPs,
          running: c.state === "running",
          ...(graceOverrideSeconds !== undefined ? { graceOverrideSeconds } : {}),
        },
      ),
    ),
  );
  const failures = results.flatMap((r) =>
    r.status === "rejected" ? [errorMessage(r.reason)] : [],
  );
  const dead: string[] = [];
  for (const { id, state } of running.sandboxes) {
    try {
      await core.deps.cri.stopPodSandbox({ podSandboxId: id }, core.lifecycle());
    } catch (err) {
      if (isNotFound(err)) continue;
      const message = `Cannot stop sandbox ${id} of pod "${running.name}": ${errorMessage(err)}`;
      (state === "ready" ? failures : dead).push(message);
    }
  }
  if (failures.length > 0) throw new Error([...failures, ...dead].join("; "));
  if (dead.length > 0) reportDeadSandboxes(core, pod, running, dead);
}

function reportDeadSandboxes(
  core: Core,
  pod: Pod | undefined,
  running: RunningPod,
  failures: string[],
): void {
  const message = `${failures.join("; ")}; nothing of the pod runs in it: the container garbage collector removes it once it can be stopped`;
  core.deps.logger.warn("cannot stop a sandbox whose processes are gone", {
    pod: `${running.namespace}/${running.name}`,
    error: message,
  });
  if (pod !== undefined) core.event(pod, "Warning", "FailedKillPod", message);
}

/** Removes a container and its log files (current and rotated); resolves to their bytes. */
export async function removeContainer(core: Core, containerId: string): Promise<number> {
  let logPath = "";
  try {
    const res = await core.deps.cri.containerStatus({ containerId });
    logPath = res.status?.logPath ?? "";
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  // Gone already (the container GC removed it between a listing and this call): removed.
  await core.deps.cri.removeContainer({ containerId }, core.lifecycle()).catch((err) => {
    if (!isNotFound(err)) throw err;
  });
  return logPath ? removeContainerLogs(logPath) : 0;
}

/** Stops (idempotent) and removes a sandbox, which must be stopped before its removal. */
export async function removeSandbox(core: Core, id: string): Promise<void> {
  await core.deps.cri.stopPodSandbox({ podSandboxId: id }, core.lifecycle()).catch((err) => {
    if (!isNotFound(err)) throw err;
  });
  await core.deps.cri.removePodSandbox({ podSandboxId: id }, core.lifecycle());
}

/** Removes every container and sandbox of a stopped pod, and the pod's log folder. A sandbox
 * that cannot be removed (one whose network cannot be torn down) runs nothing: it is left to
 * the container GC, which retries with a back-off and reports it. */
export async function removePod(core: Core, running: RunningPod): Promise<void> {
  for (const c of running.containers) await removeContainer(core, c.id);
  for (const { id } of running.sandboxes) {
    await removeSandbox(core, id).catch((err) =>
      core.deps.logger.debug("a sandbox of a removed pod is left to the container GC", {
        pod: `${running.namespace}/${running.name}`,
        sandbox: id,
        error: errorMessage(err),
      }),
    );
  }
  const stub: Pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: running.name, namespace: running.namespace, uid: running.uid },
    spec: { containers: [] },
  };
  await rm(podLogDirectory(core.deps.podLogsDir, stub), { recursive: true, force: true });
}
