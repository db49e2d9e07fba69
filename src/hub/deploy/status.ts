// What the hub shows of a DaemonSet: its Kubernetes status (the counts kubectl prints, and a
// Progressing condition saying how the rollout stands or why it stopped), and the rollout view
// (`GET .../daemonsets/NAME/rollout`): which device is on which revision and why. Pure.

import {
  type DaemonSet,
  type DaemonSetCondition,
  type DaemonSetStatus,
  ROLLOUT_ANNOTATIONS,
  scaledValue,
} from "../../api/daemonset.ts";
import { parseDuration } from "../../api/duration.ts";
import type { ObservedDevice } from "./observe.ts";
import type { RolloutPhase, RolloutRecord, RolloutSettings } from "./plan.ts";

const DEFAULT_PROGRESS_DEADLINE_MS = 10 * 60_000;
const DEFAULT_CANARY = "1";

/** The rollout settings of a DaemonSet, resolved against its devices. */
export function rolloutSettings(
  ds: DaemonSet,
  devices: readonly ObservedDevice[],
): RolloutSettings & { minReadyMs: number } {
  const members = devices.filter((d) => d.eligible && d.excluded === undefined);
  const annotations = ds.metadata.annotations ?? {};
  const canaryText = annotations[ROLLOUT_ANNOTATIONS.canary] ?? DEFAULT_CANARY;
  const canary = /^\d+$/.test(canaryText) ? Number(canaryText) : canaryText;
  const deadline = annotations[ROLLOUT_ANNOTATIONS.progressDeadline];
  const maxUnavailable = ds.spec.updateStrategy?.rollingUpdate?.maxUnavailable ?? 1;
  return {
    maxUnavailable: Math.max(1, scaledValue(maxUnavailable, members.length)),
    canary: scaledValue(canary, members.filter((d) => d.online).length),
    progressDeadlineMs:
      deadline === undefined ? DEFAULT_PROGRESS_DEADLINE_MS : parseDuration(deadline),
    autoRollback: annotations[ROLLOUT_ANNOTATIONS.autoRollback] !== "false",
    minReadyMs: (ds.spec.minReadySeconds ?? 0) * 1000,
  };
}

type DeviceState =
  | "Updated"
  | "Updating"
  | "Waiting"
  | "RolledBack"
  | "Held"
  | "Offline"
  | "NameConflict"
  | "AgentTooOld"
  | "NotConnected"
  | "InvalidName"
  | "Removing";

/** One device in the rollout view. */
export interface DeviceRollout {
  name: string;
  online: boolean;
  state: DeviceState;
  /** The revision the hub sends it. */
  revision?: number;
  /** The revision of the pod it reports. */
  running?: number;
  message?: string;
}

export interface RolloutView {
  apiVersion: "fleetlet.io/v1";
  kind: "DaemonSetRollout";
  metadata: { name: string; namespace: string };
  updateRevision: number;
  stableRevision?: number;
  phase: RolloutPhase;
  message: string;
  failed?: { revision: number; device: string; message: string; rolledBack: boolean };
  settings: {
    maxUnavailable: number;
    canary: number;
    progressDeadlineSeconds: number;
    minReadySeconds: number;
    autoRollback: boolean;
  };
  /** Devices per revision the hub sends, newest first. */
  revisions: { revision: number; devices: number }[];
  devices: DeviceRollout[];
}

export interface ViewInput {
  ds: DaemonSet;
  devices: readonly ObservedDevice[];
  update: string;
  record: RolloutRecord;
  phase: RolloutPhase;
  settings: RolloutSettings & { minReadyMs: number };
  revisionOf(hash: string | undefined): number | undefined;
}

function deviceState(
  d: ObservedDevice,
  input: ViewInput,
): { state: DeviceState; message?: string } {
  if (d.unable !== undefined)
    return { state: d.unable.reason as DeviceState, message: d.unable.message };
  if (!d.matches) return { state: "Removing", message: "no longer matches the node selection" };
  if (d.excluded !== undefined) return { state: "NameConflict", message: d.excluded.message };
  const failure = d.assigned === undefined ? undefined : d.pods.get(d.assigned)?.failure;
  if (!d.online) return { state: "Offline", message: "gets its revision when it comes back" };
  if (d.assigned === input.update) {
    const pod = d.pods.get(input.update);
    if (d.running === input.update && pod?.available) return { state: "Updated" };
    return {
      state: "Updating",
      ...((failure ?? d.refused) !== undefined && { message: failure ?? d.refused }),
    };
  }
  const f = input.record.failed;
  if (f?.hash === input.update) {
    const back = input.revisionOf(input.record.stableHash);
    if (f.rolledBack && f.devices?.includes(d.name))
      return {
        state: "RolledBack",
        message: `ran revision ${input.revisionOf(f.hash)}, sent revision ${back} again`,
      };
    return { state: "Held", message: "the rollout stopped before this device" };
  }
  return { state: "Waiting", ...(failure !== undefined && { message: failure }) };
}

function phaseMessage(input: ViewInput, devices: DeviceRollout[]): string {
  const rev = input.revisionOf(input.update);
  const online = devices.filter((d) => d.online && d.state !== "NameConflict").length;
  const updated = devices.filter((d) => d.state === "Updated").length;
  const offline = devices.filter((d) => d.state === "Offline");
  const tail =
    offline.length === 0
      ? ""
      : `; ${offline.length} offline device${offline.length === 1 ? "" : "s"} (${offline
          .slice(0, 5)
          .map((d) => d.name)
          .join(", ")}${offline.length > 5 ? ", ..." : ""}) will be updated when back`;
  const f = input.record.failed;
  const trouble = devices.find((d) => d.state === "Updating" && d.message !== undefined);
  const problem = trouble === undefined ? "" : `; device ${trouble.name}: ${trouble.message}`;
  switch (input.phase) {
    case "Failed": {
      if (f === undefined) return `rollout of revision ${rev} failed`;
      const back = input.revisionOf(input.record.stableHash);
      const after = f.rolledBack
        ? `; the devices that got it were rolled back to revision ${back}`
        : "; automatic rollback is off";
      return `rollout of revision ${rev} stopped on device ${f.device}: ${f.message}${after}`;
    }
    case "Canary":
      return `canary: waiting for ${input.settings.canary} device(s) to be available on revision ${rev} (${updated} of ${online} online devices updated)${problem}${tail}`;
    case "Rolling":
      return `${updated} of ${online} online devices updated to revision ${rev}${problem}${tail}`;
    case "Complete":
      return `revision ${rev} is available on all ${online} online devices${tail}`;
  }
}

/** The rollout view of a DaemonSet. */
export function rolloutView(input: ViewInput): RolloutView {
  const { ds, record, settings } = input;
  const devices: DeviceRollout[] = input.devices
    .map((d) => {
      const revision = input.revisionOf(d.assigned);
      const running = input.revisionOf(d.running);
      return {
        name: d.name,
        online: d.online,
        ...deviceState(d, input),
        ...(revision !== undefined && { revision }),
        ...(running !== undefined && { running }),
      };
    })
    .sort((a, b) => a.name.localeCompare(b.name));
  const perRevision = new Map<number, number>();
  for (const d of devices)
    if (d.revision !== undefined)
      perRevision.set(d.revision, (perRevision.get(d.revision) ?? 0) + 1);
  const stable = input.revisionOf(record.stableHash);
  const f = record.failed;
  return {
    apiVersion: "fleetlet.io/v1",
    kind: "DaemonSetRollout",
    metadata: { name: ds.metadata.name, namespace: ds.metadata.namespace ?? "default" },
    updateRevision: input.revisionOf(input.update) ?? 0,
    ...(stable !== undefined && { stableRevision: stable }),
    phase: input.phase,
    message: phaseMessage(input, devices),
    ...(f !== undefined &&
      f.hash === input.update && {
        failed: {
          revision: input.revisionOf(f.hash) ?? 0,
          device: f.device,
          message: f.message,
          rolledBack: f.rolledBack,
        },
      }),
    settings: {
      maxUnavailable: settings.maxUnavailable,
      canary: settings.canary,
      progressDeadlineSeconds: Math.round(settings.progressDeadlineMs / 1000),
      minReadySeconds: Math.round(settings.minReadyMs / 1000),
      autoRollback: settings.autoRollback,
    },
    revisions: [...perRevision.entries()]
      .sort(([a], [b]) => b - a)
      .map(([revision, n]) => ({ revision, devices: n })),
    devices,
  };
}

/**
 * The DaemonSet's Kubernetes status; the rollout's state is its Progressing condition.
 * `updatedNumberScheduled` counts the devices that run the revision the hub sends them: during a
 * rollout the current template's, and once a rollout stopped (phase Failed) whatever each was
 * left with or put back on, since no device will be moved further. So kubectl's `rollout
 * status`, which knows no failure for a DaemonSet, ends once the hub put the stable revision
 * back, and the failure is told by the Progressing condition (docs/kubectl.md).
 */
export function daemonSetStatus(
  ds: DaemonSet,
  devices: readonly ObservedDevice[],
  update: string,
  view: RolloutView,
  lastTransition: string,
): DaemonSetStatus {
  const eligible = devices.filter((d) => d.eligible);
  const podOf = (d: ObservedDevice) =>
    d.running === undefined ? undefined : d.pods.get(d.running);
  const available = eligible.filter((d) => podOf(d)?.available === true).length;
  const condition: DaemonSetCondition = {
    type: "Progressing",
    status: view.phase === "Failed" ? "False" : "True",
    lastTransitionTime: lastTransition,
    reason:
      view.phase === "Failed"
        ? "RolloutFailed"
        : view.phase === "Complete"
          ? "RolloutComplete"
          : view.phase === "Canary"
            ? "CanaryWaiting"
            : "NewRevisionRolling",
    message: view.message,
  };
  return {
    currentNumberScheduled: eligible.filter((d) => d.running !== undefined).length,
    numberMisscheduled: devices.filter((d) => !d.matches && d.running !== undefined).length,
    desiredNumberScheduled: eligible.length,
    numberReady: eligible.filter((d) => podOf(d)?.ready === true).length,
    observedGeneration: ds.metadata.generation ?? 1,
    updatedNumberScheduled: eligible.filter((d) =>
      view.phase === "Failed"
        ? d.running !== undefined && d.running === d.assigned
        : d.running === update,
    ).length,
    numberAvailable: available,
    numberUnavailable: eligible.length - available,
    conditions: [condition],
  };
}
