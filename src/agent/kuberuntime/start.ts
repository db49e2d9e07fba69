// Starting one container instance, in kubelet's order: crash-loop back-off check, image, config,
// CreateContainer, StartContainer, postStart hook. Every failure becomes the container's waiting
// reason (CrashLoopBackOff, ErrImagePull, ImagePullBackOff, ErrImageNeverPull, InvalidImageName,
// CreateContainerConfigError, CreateContainerError, RunContainerError, PostStartHookError), a
// "Failed" event "Error: ..." and a SyncError; it never throws.

import type { Container, Pod } from "../../api/types.ts";
import type { ContainerConfig, PodSandboxConfig } from "../../cri/index.ts";
import { generateContainerConfig, restartCountFromLogDir } from "./container-config.ts";
import { type Core, newestInstance, type SyncRun } from "./core.ts";
import { withDevices } from "./devices.ts";
import { errorMessage, fieldPathOf, formatPod, goDuration } from "./format.ts";
import { hashContainer } from "./hash.ts";
import { runHook } from "./hooks.ts";
import { killContainer } from "./kill.ts";
import { podHostname } from "./sandbox-config.ts";

export interface StartSpec {
  container: Container;
  isInit: boolean;
  sandboxConfig: PodSandboxConfig;
}

/** kubelet's stable back-off key: "<name>_<namespace>_<uid>_<container>_<hash>". */
function crashLoopKey(pod: Pod, c: Container): string {
  const ns = pod.metadata.namespace ?? "default";
  return `${pod.metadata.name}_${ns}_${pod.metadata.uid ?? ""}_${c.name}_${hashContainer(c)}`;
}

function fail(
  core: Core,
  run: SyncRun,
  spec: StartSpec,
  reason: string,
  message: string,
  detail: string,
): false {
  const name = spec.container.name;
  run.waiting.set(name, { reason, message });
  run.errors.push({
    action: spec.isInit ? "startInitContainer" : "startContainer",
    target: name,
    reason,
    message: `Cannot start container ${JSON.stringify(name)} of pod ${JSON.stringify(run.pod.metadata.name)}: ${detail}`,
  });
  core.deps.logger.info("container not started", {
    pod: run.pod.metadata.name,
    container: name,
    reason,
    detail,
  });
  return false;
}

/** Returns false (and records why) when the container is in crash-loop back-off. */
function checkBackoff(core: Core, run: SyncRun, spec: StartSpec): boolean {
  const c = spec.container;
  const dead = run.status?.containers
    .filter((s) => s.name === c.name && s.state === "exited")
    .sort((a, b) => b.createdAt - a.createdAt)[0];
  if (!dead) return true;
  const key = crashLoopKey(run.pod, c);
  const ranMs = dead.startedAt > 0 ? dead.finishedAt - dead.startedAt : 0;
  if (core.crashLoop.isInBackOffSince(key, dead.finishedAt, ranMs)) {
    const pod = formatPod(run.pod);
    core.event(
      run.pod,
      "Warning",
      "BackOff",
      `Back-off restarting failed container ${c.name} in pod ${pod}`,
      fieldPathOf(c.name, spec.isInit),
    );
    const message = `back-off ${goDuration(core.crashLoop.get(key))} restarting failed container=${c.name} pod=${pod}`;
    return fail(core, run, spec, "CrashLoopBackOff", message, message);
  }
  core.crashLoop.next(key, dead.finishedAt, ranMs);
  return true;
}

async function restartCountOf(run: SyncRun, spec: StartSpec): Promise<number> {
  const prev = newestInstance(run.status, spec.container.name);
  if (prev) return prev.restartCount + 1;
  return restartCountFromLogDir(spec.sandboxConfig.logDirectory ?? "", spec.container.name);
}

function hookHost(run: SyncRun): string {
  return run.pod.spec.hostNetwork ? "127.0.0.1" : (run.podIPs[0] ?? "");
}

async function buildConfig(
  core: Core,
  run: SyncRun,
  spec: StartSpec,
  imageRef: string,
  restartCount: number,
) {
  const { pod } = run;
  const devices = await core.deps.devices?.containerOptions(pod, spec.container, run.signal);
  return withDevices(await containerConfig(core, run, spec, imageRef, restartCount), devices);
}

function containerConfig(
  core: Core,
  run: SyncRun,
  spec: StartSpec,
  imageRef: string,
  restartCount: number,
) {
  const { pod } = run;
  const hostIP = core.nodeIP();
  const podIP = pod.spec.hostNetwork ? hostIP : (run.podIPs[0] ?? "");
  return generateContainerConfig(pod, spec.container, restartCount, {
    env: {
      nodeName: core.deps.nodeName,
      podIP,
      podIPs: podIP ? [podIP, ...run.podIPs.slice(1)] : [],
      hostIP,
      ...(core.deps.objects && { objects: core.deps.objects }),
      ...(core.deps.allocatable && { allocatable: core.deps.allocatable() }),
      onInvalidNames: (message) =>
        core.event(pod, "Warning", "InvalidEnvironmentVariableNames", message),
    },
    mounts: {
      rootDir: core.deps.rootDir,
      podIP,
      hostHosts: () => core.hostFiles.read(core.deps.hostsPath ?? "/etc/hosts"),
      random: core.random,
      volumes: core.deps.volumes,
    },
    hostname: podHostname(pod),
    nodeMemoryBytes: core.deps.nodeMemoryBytes,
    cpusetCpus: core.deps.cpusetFor?.(pod, spec.container) ?? "",
    imageRef,
  });
}

/** Creates and starts one container; returns whether it is running. */
export async function startContainer(core: Core, run: SyncRun, spec: StartSpec): Promise<boolean> {
  const { pod } = run;
  const c = spec.container;
  const fieldPath = fieldPathOf(c.name, spec.isInit);
  const failed = (reason: string, message: string) => {
    core.event(pod, "Warning", "Failed", `Error: ${message}`, fieldPath);
    return fail(core, run, spec, reason, message, message);
  };
  if (!checkBackoff(core, run, spec)) return false;
  const progress = run.onPullProgress;
  const image = await core.images.ensureImageExists(pod, c, {
    fieldPath,
    sandboxConfig: spec.sandboxConfig,
    ...(run.signal ? { signal: run.signal } : {}),
    ...(progress && { onProgress: (message: string) => progress(c.name, message) }),
  });
  if (!image.ok) {
    core.event(pod, "Warning", "Failed", `Error: ${image.reason}`, fieldPath);
    const detail = `image ${JSON.stringify(c.image)}: ${image.message}`;
    return fail(core, run, spec, image.reason, image.message, detail);
  }
  let config: ContainerConfig;
  try {
    config = await buildConfig(core, run, spec, image.imageRef, await restartCountOf(run, spec));
  } catch (err) {
    return failed("CreateContainerConfigError", errorMessage(err));
  }
  let containerId: string;
  try {
    const req = { podSandboxId: run.sandboxId, config, sandboxConfig: spec.sandboxConfig };
    const created = await core.startCall(
      pod,
      () => core.deps.cri.createContainer(req, core.lifecycle(0, run.signal)),
      run.signal,
    );
    containerId = created.containerId;
    run.changes.containers.push({ id: containerId, sandboxId: run.sandboxId });
  } catch (err) {
    return failed("CreateContainerError", errorMessage(err));
  }
  core.event(pod, "Normal", "Created", `Created container: ${c.name}`, fieldPath);
  try {
    await core.startCall(
      pod,
      () => core.deps.cri.startContainer({ containerId }, core.lifecycle(0, run.signal)),
      run.signal,
    );
  } catch (err) {
    return failed("RunContainerError", errorMessage(err));
  }
  core.event(pod, "Normal", "Started", `Started container ${c.name}`, fieldPath);
  return runPostStart(core, run, spec, containerId);
}

async function runPostStart(
  core: Core,
  run: SyncRun,
  spec: StartSpec,
  containerId: string,
): Promise<boolean> {
  const c = spec.container;
  const handler = c.lifecycle?.postStart;
  if (!handler) return true;
  const result = await runHook(handler, {
    cri: core.deps.cri,
    clock: core.deps.clock,
    containerId,
    pod: run.pod,
    container: c,
    defaultHost: hookHost(run),
    timeoutMs: core.deps.postStartTimeoutMs ?? core.deps.runtimeRequestTimeoutMs,
    ...(run.signal ? { signal: run.signal } : {}),
  });
  if (result.ok) return true;
  core.event(
    run.pod,
    "Warning",
    "FailedPostStartHook",
    result.message,
    fieldPathOf(c.name, spec.isInit),
  );
  try {
    await killContainer(
      core,
      run.pod,
      { containerId, name: c.name, reason: "FailedPostStartHook", message: "" },
      { podIPs: run.podIPs },
    );
  } catch (err) {
    core.deps.logger.warn("cannot kill container after failed postStart hook", {
      pod: run.pod.metadata.name,
      container: c.name,
      error: errorMessage(err),
    });
  }
  return fail(
    core,
    run,
    spec,
    "PostStartHookError",
    result.message,
    `postStart hook failed: ${result.message}`,
  );
}
