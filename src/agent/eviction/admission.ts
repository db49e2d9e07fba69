// Admission under node pressure, as the kubelet's eviction admit handler: with no pressure every
// pod is admitted, and so is a critical pod always; under memory pressure alone a BestEffort pod
// is rejected unless it tolerates the node.kubernetes.io/memory-pressure taint; under disk or PID
// pressure every other pod is rejected. The reason is "Evicted", the message names the
// conditions.
import { getPodQOS } from "../../api/index.ts";
import type { Pod, Toleration } from "../../api/types.ts";
import type { PressureCondition } from "../evictionapi/signals.ts";
import { EVICTED_REASON, nodeConditionMessage } from "./message.ts";
import { isCriticalPod } from "./rank.ts";

const MEMORY_PRESSURE_TAINT = "node.kubernetes.io/memory-pressure";

/** Whether the toleration tolerates a taint of this key and effect with no value (the kubelet's
 * ToleratesTaint; validation allows an empty key only with Exists). */
export function tolerates(t: Toleration, key: string, effect: string): boolean {
  if (t.effect !== undefined && t.effect !== "" && t.effect !== effect) return false;
  if (t.key !== undefined && t.key !== "" && t.key !== key) return false;
  const op = t.operator ?? "Equal";
  if (op === "Exists") return true;
  return op === "Equal" && (t.value ?? "") === "";
}

export function admitUnderPressure(
  pod: Pod,
  conditions: readonly PressureCondition[],
): { reason: string; message: string } | undefined {
  if (conditions.length === 0 || isCriticalPod(pod)) return undefined;
  if (conditions.length === 1 && conditions[0] === "MemoryPressure") {
    if (getPodQOS(pod) !== "BestEffort") return undefined;
    const ok = (pod.spec.tolerations ?? []).some((t) =>
      tolerates(t, MEMORY_PRESSURE_TAINT, "NoSchedule"),
    );
    if (ok) return undefined;
  }
  return { reason: EVICTED_REASON, message: nodeConditionMessage(conditions) };
}
