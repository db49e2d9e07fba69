// What the hub sees of a DaemonSet on each device, for the planner and the status: whether the
// device should run it, whether it is online, what it was sent and acknowledged, and how each
// of its pods of the DaemonSet is doing. Readiness is timed with the hub's clock.
import { nodeMatches } from "../../api/affinity.ts";
import { type DaemonSet, REVISION_HASH_LABEL } from "../../api/daemonset.ts";
import { isDNS1123Subdomain } from "../../api/index.ts";
import type { ContainerStatus, Pod } from "../../api/types.ts";
import { AGENT_FEATURES } from "../../protocol/index.ts";
import type { DesiredReport, NodeRecord } from "../store.ts";
import type { DeviceFacts, PodFacts } from "./plan.ts";
import { hubPodName, ownerDaemonSet } from "./pods.ts";

/** The fleet as the deployer reads it. */
export interface FleetReader {
  readonly nodes: ReadonlyMap<string, NodeRecord>;
  isOnline(name: string): boolean;
  podsOf(name: string): ReadonlyMap<string, Pod>;
  desiredReport(name: string): DesiredReport | undefined;
}

/** A device's facts for one DaemonSet, with what the status shows beyond the planner's needs. */
export interface ObservedDevice extends DeviceFacts {
  /** Its labels match the DaemonSet's node selection. */
  matches: boolean;
  /** Why a matching device cannot take part: AgentTooOld, NotConnected. */
  unable?: { reason: string; message: string };
  /** The revision hash of the pod it reports (the newest of several). */
  running?: string;
}

/** The labels a device is selected by: its own, overlaid with the hub's. */
function deviceLabels(rec: NodeRecord): Record<string, string> {
  return { ...rec.node?.metadata.labels, ...rec.hubLabels };
}

/** Per pod uid: since when (hub time) it is Ready, and its restarts when that was seen. */
export class ReadinessTracker {
  private readonly seen = new Map<string, { readySince?: number; restarts: number }>();
  private marks = new Set<string>();

  /** Ready and since when, for a pod observed at `now`. */
  observe(pod: Pod, now: number): { ready: boolean; readySince?: number } {
    const uid = pod.metadata.uid ?? "";
    this.marks.add(uid);
    const statuses = pod.status?.containerStatuses ?? [];
    const restarts = statuses.reduce((n, c) => n + c.restartCount, 0);
    const ready =
      pod.status?.phase === "Running" &&
      pod.status.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true;
    const last = this.seen.get(uid);
    const readySince = !ready
      ? undefined
      : last?.readySince !== undefined && last.restarts === restarts
        ? last.readySince
        : now;
    this.seen.set(uid, { restarts, ...(readySince !== undefined && { readySince }) });
    return { ready, ...(readySince !== undefined && { readySince }) };
  }

  /** Forgets the pods not observed since the last sweep. */
  sweep(): void {
    for (const uid of this.seen.keys()) if (!this.marks.has(uid)) this.seen.delete(uid);
    this.marks = new Set();
  }
}

function crashLoop(statuses: ContainerStatus[]): string | undefined {
  for (const c of statuses) {
    if (c.state.waiting?.reason !== "CrashLoopBackOff") continue;
    const t = c.lastState.terminated;
    const last =
      t === undefined ? "" : `; last exit code ${t.exitCode}${t.reason ? `, ${t.reason}` : ""}`;
    return `container "${c.name}" is crash-looping (CrashLoopBackOff${last})`;
  }
  return undefined;
}

/** Why a pod fails a rollout's gate, from its reported status; undefined when it does not. */
function podFailure(pod: Pod): string | undefined {
  const st = pod.status;
  const name = `pod "${pod.metadata.name}"`;
  if (st?.phase === "Failed")
    return `${name} failed${st.reason ? ` (${st.reason})` : ""}${st.message ? `: ${st.message}` : ""}`;
  const crash = crashLoop([...(st?.initContainerStatuses ?? []), ...(st?.containerStatuses ?? [])]);
  return crash === undefined ? undefined : `${name}: ${crash}`;
}

export interface ObserveContext {
  fleet: FleetReader;
  tracker: ReadinessTracker;
  now: number;
  minReadyMs: number;
  /** The hash assigned to a device, if any. */
  assigned(node: string): string | undefined;
  /** When the device acknowledged the state carrying its assignment; undefined: not yet. */
  deliveredAt(node: string, rec: NodeRecord): number | undefined;
  /** The pod template reads ConfigMaps or Secrets, and Secrets among them. */
  usesObjects: boolean;
  usesSecrets: boolean;
  /** The device was last sent its state without Secrets (an insecure connection). */
  withheld(node: string): boolean;
}

/** Why a device that was sent its pod cannot use it, from the hub's side. */
const SECRETS_WITHHELD =
  "SecretsWithheld: the hub sends Secrets only over TLS or loopback, and this device's connection is neither";

function podFacts(pod: Pod, ctx: ObserveContext): PodFacts {
  const { ready, readySince } = ctx.tracker.observe(pod, ctx.now);
  const failure = podFailure(pod);
  return {
    ready,
    available: readySince !== undefined && ctx.now - readySince >= ctx.minReadyMs,
    ...(failure !== undefined && { failure }),
  };
}

/** Why a matching device cannot run the DaemonSet's pod at all, if it cannot. */
function cannotRun(ds: DaemonSet, node: string, rec: NodeRecord, ctx: ObserveContext) {
  if (rec.features === undefined)
    return { reason: "NotConnected", message: "the device has not connected yet" };
  if (!rec.features.includes(AGENT_FEATURES.desiredPods))
    return { reason: "AgentTooOld", message: "the device's agent does not run hub pods" };
  if (ctx.usesObjects && !rec.features.includes(AGENT_FEATURES.desiredConfig))
    return {
      reason: "AgentTooOld",
      message: "the device's agent does not take ConfigMaps and Secrets from the hub",
    };
  const nameErrors = isDNS1123Subdomain(hubPodName(ds, node));
  if (nameErrors.length > 0)
    return {
      reason: "InvalidName",
      message: `the pod name "${hubPodName(ds, node)}" is not valid: ${nameErrors[0]}`,
    };
  return undefined;
}

/** Every device that matches the DaemonSet or has one of its pods or an assignment. */
export function observeDevices(ds: DaemonSet, ctx: ObserveContext): ObservedDevice[] {
  const uid = ds.metadata.uid ?? "";
  const podName = `${ds.metadata.namespace ?? "default"}/${hubPodName(ds, "")}`;
  const out: ObservedDevice[] = [];
  for (const [name, rec] of ctx.fleet.nodes) {
    const matches =
      rec.revokedAt === undefined && nodeMatches(ds.spec.template.spec, name, deviceLabels(rec));
    const assigned = ctx.assigned(name);
    const pods = new Map<string, PodFacts>();
    let running: string | undefined;
    for (const pod of ctx.fleet.podsOf(name).values()) {
      if (ownerDaemonSet(pod) !== uid) continue;
      const hash = pod.metadata.labels?.[REVISION_HASH_LABEL] ?? "";
      pods.set(hash, podFacts(pod, ctx));
      if (running === undefined || hash === assigned) running = hash;
    }
    if (!matches && assigned === undefined && pods.size === 0) continue;
    const unable = cannotRun(ds, name, rec, ctx);
    const report = ctx.fleet.desiredReport(name);
    const conflict = report?.conflicts.find((c) => c.pod === `${podName}${name}`);
    const delivered = assigned === undefined ? undefined : ctx.deliveredAt(name, rec);
    const refused =
      ctx.usesSecrets && ctx.withheld(name)
        ? SECRETS_WITHHELD
        : delivered === undefined && report?.refused !== undefined
          ? `the device refused its desired state: ${report.refused.reason}`
          : undefined;
    out.push({
      name,
      matches,
      eligible: matches && unable === undefined,
      online: ctx.fleet.isOnline(name),
      pods,
      ...(unable !== undefined && { unable }),
      ...(conflict !== undefined && {
        excluded: { reason: "NameConflict", message: conflict.message },
      }),
      ...(assigned !== undefined && { assigned }),
      ...(delivered !== undefined && { deliveredAt: delivered }),
      ...(refused !== undefined && { refused }),
      ...(running !== undefined && { running }),
    });
  }
  return out;
}
