// Converts the runtime's container instances into v1 container statuses, with kubelet's rules:
// one status per spec container, in spec order; the newest runtime instance gives `state`, the
// one before it `lastState`; containers never created wait with ContainerCreating (or
// PodInitializing when the pod has init containers); a container that will be restarted and
// whose last sync failed waits with that failure's reason; a container that vanished while
// running is reported terminated with ContainerStatusUnknown and exit code 137.

import { isSidecar } from "../../api/containers.ts";
import type { Container, ContainerState, ContainerStatus, Pod } from "../../api/types.ts";
import * as kc from "../kubecontainer/types.ts";
import {
  ContainerCreating,
  ContainerStatusUnknown,
  PodInitializing,
  type SyncError,
  toRFC3339,
} from "./reasons.ts";

/** The runtime name in status.containerID ("containerd://<id>"). */
const RUNTIME_SCHEME = "containerd";

export interface ConvertContainersInput {
  pod: Pod;
  runtime: kc.PodStatus | undefined;
  /** The spec containers to report: pod.spec.containers or pod.spec.initContainers. */
  containers: Container[];
  isInit: boolean;
  /** The same list from the previous status. */
  previous: ContainerStatus[] | undefined;
  /** The pod is being deleted: nothing is restarted, vanished containers add no restart. */
  deleting: boolean;
  syncErrors: ReadonlyMap<string, SyncError>;
}

/** v1 statuses for `containers`, in spec order; ready and started are false (see probes.ts). */
export function convertContainerStatuses(input: ConvertContainersInput): ContainerStatus[] {
  const hasInit = (input.pod.spec.initContainers?.length ?? 0) > 0;
  const defaultReason = hasInit ? PodInitializing : ContainerCreating;
  const old = new Map((input.previous ?? []).map((s) => [s.name, s]));
  const statuses = new Map<string, ContainerStatus>();
  for (const c of input.containers) {
    statuses.set(c.name, initialStatus(c, old.get(c.name), defaultReason));
  }
  const instances = newestFirst(input.runtime?.containers ?? []);
  markVanished(input, instances, statuses, old, defaultReason);
  applyInstances(instances, statuses, old);
  applySyncErrors(input, statuses);
  return input.containers.flatMap((c) => statuses.get(c.name) ?? []);
}

function initialStatus(
  c: Container,
  old: ContainerStatus | undefined,
  defaultReason: string,
): ContainerStatus {
  if (old?.state.terminated) return structuredClone(old);
  return {
    name: c.name,
    state: { waiting: { reason: defaultReason } },
    lastState: old ? structuredClone(old.lastState) : {},
    ready: false,
    restartCount: old?.restartCount ?? 0,
    image: c.image,
    imageID: "",
    started: false,
  };
}

function newestFirst(list: kc.ContainerStatus[]): kc.ContainerStatus[] {
  return [...list].sort((a, b) => b.createdAt - a.createdAt);
}

/** A container the runtime lost while it was running counts as terminated, so that the pod
 * does not fall back to Pending. */
function markVanished(
  input: ConvertContainersInput,
  instances: kc.ContainerStatus[],
  statuses: Map<string, ContainerStatus>,
  old: Map<string, ContainerStatus>,
  defaultReason: string,
): void {
  const present = new Set(instances.map((i) => i.name));
  for (const c of input.containers) {
    const prev = old.get(c.name);
    const status = statuses.get(c.name);
    if (present.has(c.name) || !prev || !status) continue;
    if (prev.state.terminated || !prev.state.running) continue;
    if (status.state.waiting?.reason !== defaultReason || status.lastState.terminated) continue;
    status.lastState = {
      terminated: {
        exitCode: 137,
        reason: ContainerStatusUnknown,
        message:
          "The container could not be located when the pod was deleted.  The container used to be Running",
      },
    };
    if (!input.deleting) status.restartCount += 1;
  }
}

function applyInstances(
  instances: kc.ContainerStatus[],
  statuses: Map<string, ContainerStatus>,
  old: Map<string, ContainerStatus>,
): void {
  const seen = new Map<string, number>();
  for (const inst of instances) {
    const status = statuses.get(inst.name);
    const count = seen.get(inst.name) ?? 0;
    if (!status || count >= 2) continue;
    const converted = convertInstance(inst, old.get(inst.name));
    if (count === 0) statuses.set(inst.name, converted);
    else status.lastState = converted.state;
    seen.set(inst.name, count + 1);
  }
}

function convertInstance(inst: kc.ContainerStatus, old: ContainerStatus | undefined) {
  const containerID = `${RUNTIME_SCHEME}://${inst.id}`;
  const status: ContainerStatus = {
    name: inst.name,
    state: {},
    lastState: {},
    ready: false,
    restartCount: inst.restartCount,
    image: inst.image,
    imageID: inst.imageRef,
    containerID,
    started: false,
  };
  if (inst.state === "running") {
    status.state = { running: { startedAt: toRFC3339(inst.startedAt) } };
  } else if (inst.state === "exited") {
    status.state = terminatedState(inst, containerID);
  } else if (inst.state === "unknown" && old?.state.running) {
    status.state = {
      terminated: {
        exitCode: 137,
        reason: ContainerStatusUnknown,
        message: "The container could not be located when the pod was terminated",
      },
    };
    status.restartCount = old.restartCount + 1;
  } else {
    status.state = { waiting: {} };
  }
  return status;
}

function terminatedState(inst: kc.ContainerStatus, containerID: string): ContainerState {
  const reason = inst.reason || (inst.exitCode === 0 ? "Completed" : "Error");
  return {
    terminated: {
      exitCode: inst.exitCode,
      reason,
      ...(inst.message ? { message: inst.message } : {}),
      ...(inst.startedAt > 0 ? { startedAt: toRFC3339(inst.startedAt) } : {}),
      ...(inst.finishedAt > 0 ? { finishedAt: toRFC3339(inst.finishedAt) } : {}),
      containerID,
    },
  };
}

/** Containers that will be (re)started show the last sync's failure as their waiting reason. */
function applySyncErrors(input: ConvertContainersInput, statuses: Map<string, ContainerStatus>) {
  for (const c of input.containers) {
    const status = statuses.get(c.name);
    if (!status) continue;
    const newest = input.runtime ? kc.findContainer(input.runtime, c.name) : undefined;
    if (input.isInit) {
      if (newest?.state === "exited" && newest.exitCode === 0) continue;
      if (!newest && !isSidecar(c) && status.state.waiting && anyRegularCreated(input)) {
        status.state = {
          terminated: {
            exitCode: 0,
            reason: "Completed",
            message:
              "Unable to get init container status from container runtime and pod has been initialized, treat it as exited normally",
          },
        };
        continue;
      }
    }
    if (!shouldRestart(c, input.pod, newest, input.deleting)) continue;
    const failure = input.syncErrors.get(c.name);
    if (!failure) continue;
    if (status.state.terminated) status.lastState = status.state;
    status.state = {
      waiting: { reason: failure.reason, ...(failure.message ? { message: failure.message } : {}) },
    };
  }
}

function anyRegularCreated(input: ConvertContainersInput): boolean {
  if (!input.runtime) return false;
  const runtime = input.runtime;
  return input.pod.spec.containers.some((c) => {
    const s = kc.findContainer(runtime, c.name);
    return s !== undefined && s.state !== "unknown";
  });
}

/** Whether the next sync starts this container again (kubelet's ShouldContainerBeRestarted). */
function shouldRestart(
  c: Container,
  pod: Pod,
  newest: kc.ContainerStatus | undefined,
  deleting: boolean,
): boolean {
  if (deleting) return false;
  if (!newest) return true;
  if (newest.state === "running") return false;
  if (newest.state === "unknown" || newest.state === "created") return true;
  if (isSidecar(c)) return true;
  const policy = pod.spec.restartPolicy ?? "Always";
  if (policy === "Never") return false;
  if (policy === "OnFailure" && newest.exitCode === 0) return false;
  return true;
}
