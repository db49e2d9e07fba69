// The reasons and messages kubelet writes into pod status, and small helpers shared by the
// status generator. Strings match upstream so that users and tools recognise them.

import type { Pod } from "../../api/types.ts";

/** Waiting reason of an app or init container that has not been created yet. */
export const ContainerCreating = "ContainerCreating";
/** Waiting reason of every container of a pod with init containers, until it is created. */
export const PodInitializing = "PodInitializing";
/** Terminated reason of a container the runtime no longer knows about. */
export const ContainerStatusUnknown = "ContainerStatusUnknown";

// Condition reasons.
export const ContainersNotReady = "ContainersNotReady";
export const ContainersNotInitialized = "ContainersNotInitialized";
export const PodCompleted = "PodCompleted";
export const PodFailed = "PodFailed";
/** fleetlet's reason for Ready=False while the pod is being stopped (no upstream equivalent). */
export const PodTerminating = "PodTerminating";

/** A failure of the last sync for one container, shown as its waiting state. */
export interface SyncError {
  /** e.g. "ErrImagePull", "ImagePullBackOff", "CrashLoopBackOff", "CreateContainerConfigError". */
  reason: string;
  message: string;
}

/** The CrashLoopBackOff message kubelet writes, e.g.
 * `back-off 20s restarting failed container=web pod=web-node1_default(uid)`. */
export function crashLoopMessage(delayMs: number, container: string, pod: Pod): string {
  const full = `${pod.metadata.name}_${pod.metadata.namespace ?? "default"}`;
  return `back-off ${formatGoDuration(delayMs)} restarting failed container=${container} pod=${full}(${pod.metadata.uid ?? ""})`;
}

/** Go's time.Duration.String() for whole seconds and minutes: "20s", "1m20s", "5m0s". */
export function formatGoDuration(ms: number): string {
  const total = Math.round(ms / 1000);
  if (total < 60) return `${total}s`;
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  return h > 0 ? `${h}h${m}m${s}s` : `${m}m${s}s`;
}

/** RFC 3339 in UTC with second precision, as the API writes times: "2024-05-01T10:00:00Z". */
export function toRFC3339(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(".000Z", "Z");
}

/** A list formatted as Go's %s formats a []string: "[a b]". */
export function goList(names: string[]): string {
  return `[${names.join(" ")}]`;
}
