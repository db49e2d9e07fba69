// The kubelet's evictPod: an Evicted event, then a kill that ends the pod Failed with reason
// Evicted (and a DisruptionTarget condition when the eviction asks for one).
import type { Pod } from "../../api/types.ts";
import type { PodUpdate } from "../podworkers/index.ts";
import type { EvictRequest } from "./manager.ts";
import { EVICTED_REASON } from "./message.ts";

export interface PodEvictorDeps {
  /** Records a Warning event about the pod. */
  warn(pod: Pod, reason: string, message: string): void;
  updatePod(update: PodUpdate): void;
}

export function createPodEvictor(deps: PodEvictorDeps): (pod: Pod, request: EvictRequest) => void {
  return (pod, request) => {
    deps.warn(pod, EVICTED_REASON, request.message);
    const disruption = {
      type: "DisruptionTarget" as const,
      status: "True" as const,
      reason: "TerminationByKubelet",
      message: request.message,
    };
    deps.updatePod({
      pod,
      type: "kill",
      kill: {
        gracePeriodSeconds: request.gracePeriodSeconds,
        reason: EVICTED_REASON,
        message: request.message,
        evict: true,
        ...(request.disruption && { conditions: [disruption] }),
      },
    });
  };
}
