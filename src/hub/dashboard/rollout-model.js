// @ts-check
// What the dashboard shows of DaemonSets and their rollouts, from the hub's DaemonSet list and
// rollout view (GET /apis/apps/v1/.../daemonsets/NAME/rollout). Pure functions; no DOM.

/** @typedef {import("./model.js").State} State */
/** @typedef {{ name: string, online: boolean, state: string, revision?: number, running?: number, message?: string }} DeviceRollout */
/** @typedef {{ metadata: { name: string, namespace: string }, updateRevision: number, stableRevision?: number, phase: string, message: string, failed?: { revision: number, device: string, message: string, rolledBack: boolean }, settings: { maxUnavailable: number, canary: number, progressDeadlineSeconds: number, minReadySeconds: number, autoRollback: boolean }, revisions: { revision: number, devices: number }[], devices: DeviceRollout[] }} RolloutView */

/**
 * The rollout's phase as a badge: Complete (ok), Canary or Rolling (warn), Failed (bad).
 * @param {string} phase
 * @returns {State}
 */
export function rolloutState(phase) {
  if (phase === "Complete") return { label: "Rolled out", tone: "ok" };
  if (phase === "Failed") return { label: "Stopped", tone: "bad" };
  if (phase === "Canary") return { label: "Canary", tone: "warn" };
  return { label: "Rolling out", tone: "warn" };
}

/**
 * A device's place in the rollout as a badge.
 * @param {string} state
 * @returns {State}
 */
export function deviceRolloutState(state) {
  switch (state) {
    case "Updated":
      return { label: "Updated", tone: "ok" };
    case "Updating":
      return { label: "Updating", tone: "warn" };
    case "Waiting":
    case "Held":
    case "Offline":
    case "NotConnected":
      return { label: state, tone: "none" };
    case "RolledBack":
      return { label: "Rolled back", tone: "warn" };
    default:
      return { label: state, tone: "bad" };
  }
}

/**
 * Devices with a problem or still to update first, then by name.
 * @param {DeviceRollout[]} devices
 */
export function devicesByAttention(devices) {
  const rank = (/** @type {DeviceRollout} */ d) =>
    d.message ? 0 : d.state === "Updated" ? 3 : d.state === "Waiting" ? 2 : 1;
  return [...devices].sort((a, b) => rank(a) - rank(b) || a.name.localeCompare(b.name));
}

/**
 * "2 / 3" devices updated of those that should run the pod.
 * @param {any} ds a DaemonSet with status
 */
export function updatedOf(ds) {
  const s = ds.status ?? {};
  return `${s.updatedNumberScheduled ?? 0} / ${s.desiredNumberScheduled ?? 0}`;
}

/** @typedef {{ revision: number, metadata: { creationTimestamp?: string, annotations?: Record<string, string> } }} ControllerRevision */
/** @typedef {{ revision: number, devices: number, mark?: State, cause: string, created: string }} RevisionRow */

/**
 * The revisions table, as `rollout history` lists them: every kept revision, newest first, with
 * the devices the hub sends it, its change cause, and a mark on the current template's revision
 * ("Current") and, when it differs, on the last one fully rolled out ("Stable").
 * @param {RolloutView} view
 * @param {ControllerRevision[]} history
 * @returns {RevisionRow[]}
 */
export function revisionRows(view, history) {
  const sent = new Map(view.revisions.map((r) => [r.revision, r.devices]));
  return [...history]
    .sort((a, b) => b.revision - a.revision)
    .map((r) => {
      /** @type {State | undefined} */
      const mark =
        r.revision === view.updateRevision
          ? { label: "Current", tone: view.phase === "Failed" ? "bad" : "ok" }
          : r.revision === view.stableRevision
            ? { label: "Stable", tone: "none" }
            : undefined;
      return {
        revision: r.revision,
        devices: sent.get(r.revision) ?? 0,
        ...(mark !== undefined && { mark }),
        cause: r.metadata.annotations?.["kubernetes.io/change-cause"] ?? "",
        created: r.metadata.creationTimestamp ?? "",
      };
    });
}
