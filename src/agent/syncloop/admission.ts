// Admission (the kubelet's canAdmitPod): a new pod runs only if every admit handler lets it, in
// the kubelet's order: the eviction manager's (no new pods that would add to node pressure),
// then the pod count, then resources (the container manager). A rejected pod is Failed with the
// handler's reason and message, an event and a log line, and never runs; one rejected for node
// pressure, like an evicted pod, is readmitted when the eviction manager says its wait is over.
import type { Pod } from "../../api/types.ts";
import type { Logger } from "../../util/log.ts";
import type { AdmitFailure, AdmitHandlers } from "../lifecycle/index.ts";
import type { PodUpdate } from "../podworkers/index.ts";
import { type PodRecord, uidOf } from "./pods.ts";

export interface AdmissionDeps {
  logger: Logger;
  maxPods: number;
  /** Handlers before and after the pod count (eviction first, resources last). */
  admitHandlers: AdmitHandlers;
  /** Pods admitted and not terminated. */
  activePods(): Pod[];
  updatePod(update: PodUpdate): void;
  /** Publishes the Failed status of a rejected pod. */
  rejectPod(pod: Pod, reason: string, message: string): void;
  event(pod: Pod, type: "Normal" | "Warning", reason: string, message: string): void;
}

export function createAdmission(deps: AdmissionDeps, record: PodRecord) {
  const log = deps.logger;

  function failure(pod: Pod, active: readonly Pod[]): AdmitFailure | undefined {
    for (const handler of deps.admitHandlers.beforeCount) {
      const f = handler(pod, active);
      if (f !== undefined) return f;
    }
    if (active.length >= deps.maxPods) {
      return {
        reason: "OutOfpods",
        message: `Node didn't have enough resource: pods, requested: 1, used: ${active.length}, capacity: ${deps.maxPods}`,
      };
    }
    for (const handler of deps.admitHandlers.afterCount) {
      const f = handler(pod, active);
      if (f !== undefined) return f;
    }
    return undefined;
  }

  /** Admits and starts the pod, or rejects it; it is known either way. */
  function admit(pod: Pod): boolean {
    const uid = uidOf(pod);
    const f = failure(
      pod,
      deps.activePods().filter((p) => uidOf(p) !== uid),
    );
    record.pods.setPod(pod);
    if (f === undefined) {
      record.rejected.delete(uid);
      deps.updatePod({ pod, type: "create" });
      return true;
    }
    record.rejected.add(uid);
    deps.rejectPod(pod, f.reason, f.message);
    deps.event(pod, "Warning", f.reason, f.message);
    log.warn("pod rejected at admission", {
      pod: pod.metadata.name,
      reason: f.reason,
      message: f.message,
    });
    return false;
  }

  /** New pods from a source, the ones seen first admitted first. */
  function addPods(pods: readonly Pod[]): void {
    const seen = (p: Pod) => p.metadata.annotations?.["kubernetes.io/config.seen"] ?? "";
    const sorted = [...pods].sort((a, b) => seen(a).localeCompare(seen(b)));
    for (const pod of sorted) if (!record.pods.has(uidOf(pod))) admit(pod);
  }

  return { admit, addPods };
}
