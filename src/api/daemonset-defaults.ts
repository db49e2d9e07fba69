// The API server's defaults of an apps/v1 DaemonSet (pkg/apis/apps/v1/defaults.go): its update
// strategy, revision history limit, and its pod template's spec defaulted as a pod's
// (applyPodDefaults). Idempotent; returns a new object and leaves its input untouched.
import type { DaemonSet, DaemonSetSpec, PodTemplateSpec } from "./daemonset.ts";
import { applyPodDefaults } from "./defaults.ts";

export const DEFAULT_REVISION_HISTORY_LIMIT = 10;

/** A pod template with its spec defaulted as the API server defaults a pod's. */
export function applyPodTemplateDefaults(template: PodTemplateSpec): PodTemplateSpec {
  const pod = applyPodDefaults({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "" },
    spec: template.spec,
  });
  return { ...template, spec: pod.spec };
}

/** The update strategy as stored: RollingUpdate, with maxUnavailable 1 and maxSurge 0 unset. */
function defaultStrategy(s: DaemonSetSpec["updateStrategy"]): DaemonSetSpec["updateStrategy"] {
  const type = s?.type ?? "RollingUpdate";
  if (type !== "RollingUpdate") return { ...s, type };
  const ru = s?.rollingUpdate;
  return {
    ...s,
    type,
    rollingUpdate: { ...ru, maxUnavailable: ru?.maxUnavailable ?? 1, maxSurge: ru?.maxSurge ?? 0 },
  };
}

/** The DaemonSet as the API server stores it: every defaulted field set. */
export function applyDaemonSetDefaults(ds: DaemonSet): DaemonSet {
  return {
    ...ds,
    spec: {
      ...ds.spec,
      template: applyPodTemplateDefaults(ds.spec.template),
      updateStrategy: defaultStrategy(ds.spec.updateStrategy),
      revisionHistoryLimit: ds.spec.revisionHistoryLimit ?? DEFAULT_REVISION_HISTORY_LIMIT,
    },
  };
}
