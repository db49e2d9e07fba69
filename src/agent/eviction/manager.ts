// The eviction manager (the kubelet's pkg/kubelet/eviction): every monitoring period it observes
// the node's signals, lets the planner decide (plan.ts), publishes the pressure conditions, and
// then, in the kubelet's order: evicts pods over their own local storage limits; else, when a
// threshold acts, reclaims node-level resources for a disk signal (dead containers, then unused
// images) and, if still under pressure, ranks the active pods and evicts ONE, then waits (up to
// 30 s) for it to be cleaned up before the next cycle.
//
// Invariants: a critical pod (rank.ts) is never evicted; synchronize() never throws for a signal
// or a pod figure it cannot read (a signal is reported once, then left out until it reads again);
// the conditions and admit() always reflect the last cycle.
import type { Pod } from "../../api/types.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { admitUnderPressure } from "./admission.ts";
import { hasLocalStorageLimit, localStorageViolation } from "./local-storage.ts";
import { evictionMessage } from "./message.ts";
import { type CyclePlan, INITIAL_STATE, planCycle, reclaimSteps, thresholdsMet } from "./plan.ts";
import type { StatsWanted } from "./pod-stats.ts";
import { diskParts, isCriticalPod, rankPods } from "./rank.ts";
import { createReadmission } from "./readmission.ts";
import {
  isMemorySignal,
  type Observation,
  type Observations,
  type PressureCondition,
  SIGNAL_CONDITION,
  type Signal,
} from "./signals.ts";
import { isHardThreshold, type Threshold } from "./thresholds.ts";
import type { PodUsage } from "./usage.ts";

export const POD_CLEANUP_TIMEOUT_MS = 30_000;
const POD_CLEANUP_POLL_MS = 1000;
/** The grace period of a hard or local storage eviction (the kubelet's immediate eviction). */
export const IMMEDIATE_GRACE_SECONDS = 1;

/** How the manager asks a pod to be evicted. */
export interface EvictRequest {
  gracePeriodSeconds: number;
  /** The kubelet's Evicted message. */
  message: string;
  /** Whether to set the DisruptionTarget condition (node pressure evictions). */
  disruption: boolean;
}

export interface EvictionManagerDeps {
  clock: Clock;
  logger: Logger;
  thresholds: readonly Threshold[];
  pressureTransitionMs: number;
  monitoringPeriodMs: number;
  /** Caps the pod's grace period on soft evictions when > 0 (evictionMaxPodGracePeriod). */
  maxPodGracePeriodSeconds: number;
  /** Reads the signals; each one that cannot be read is in `errors` instead. */
  observe(signals: ReadonlySet<Signal>): Promise<{
    observations: Map<Signal, Observation>;
    errors: Map<Signal, string>;
  }>;
  /** Whether the image filesystem is a separate one from the root dir's. */
  dedicatedImageFs(): Promise<boolean>;
  /** Pods admitted and running (not terminating). */
  activePods(): Pod[];
  podUsage(pods: readonly Pod[], wanted: StatsWanted): Promise<Map<string, PodUsage>>;
  /** Starts stopping the pod as evicted (event, status, kill); returns at once. */
  evictPod(pod: Pod, request: EvictRequest): void;
  /** Whether an evicted pod's containers are stopped and its content removed. */
  podCleanedUp(uid: string): boolean;
  /** Records an event about the node. */
  nodeEvent(type: "Normal" | "Warning", reason: string, message: string): void;
  /** Node-level reclaim (garbage collection); absent: none. Each step resolves when done. */
  reclaim?: { containers(): Promise<unknown>; images(): Promise<unknown> };
  /** Called when the set of True pressure conditions changes. */
  onConditions?: (conditions: readonly PressureCondition[]) => void;
}

export interface EvictionManager {
  /** One monitoring cycle; returns the pods it evicted. */
  synchronize(): Promise<Pod[]>;
  /** Polls until every pod is cleaned up, or 30 s passed, or `signal` aborts. */
  waitForCleanup(pods: readonly Pod[], signal?: AbortSignal): Promise<void>;
  /** The pressure conditions that are True. */
  conditions(): readonly PressureCondition[];
  /** Admission under pressure; a rejected pod waits for readmission. */
  admit(pod: Pod): { reason: string; message: string } | undefined;
  /** UIDs of evicted or pressure-rejected pods whose wait is over (see readmission.ts). */
  readmissionsDue(): string[];
  /** Stops waiting to readmit a pod (readmitted, or gone). */
  forgetReadmission(uid: string): void;
  /** Pods evicted since the start, by signal (or local storage limit, as the kubelet's metric
   * labels them: emptydirfs.limit, ephemeralpodfs.limit, ephemeralcontainerfs.limit). */
  evictions(): ReadonlyMap<string, number>;
  run(signal: AbortSignal): Promise<void>;
}

const fullName = (pod: Pod) => `${pod.metadata.namespace ?? "default"}/${pod.metadata.name}`;
const uidOf = (pod: Pod) => pod.metadata.uid ?? "";

export function createEvictionManager(deps: EvictionManagerDeps): EvictionManager {
  const log = deps.logger;
  const readmission = createReadmission({ transitionMs: deps.pressureTransitionMs });
  const signals = new Set(deps.thresholds.map((t) => t.signal));
  let state = INITIAL_STATE;
  let conditions: readonly PressureCondition[] = [];
  /** When each condition last became False; all are False from the start. */
  const falseSince = new Map<PressureCondition, number>();
  const started = deps.clock.now();
  /** The last error of each signal that could not be read (reported once). */
  const unreadable = new Map<Signal, string>();
  let dedicated: boolean | undefined;
  const evictions = new Map<string, number>();

  async function observe(): Promise<Observations> {
    const { observations, errors } = await deps.observe(signals);
    for (const [signal, error] of errors) {
      if (unreadable.get(signal) !== error)
        log.warn("cannot read an eviction signal; going on without it", { signal, error });
      unreadable.set(signal, error);
    }
    for (const signal of observations.keys()) {
      if (unreadable.delete(signal)) log.info("eviction signal readable again", { signal });
    }
    return observations;
  }

  function setConditions(next: readonly PressureCondition[]): void {
    const now = deps.clock.now();
    for (const c of conditions) if (!next.includes(c)) falseSince.set(c, now);
    const changed = next.length !== conditions.length || next.some((c) => !conditions.includes(c));
    conditions = next;
    if (!changed) return;
    log.info("node pressure conditions changed", { conditions: next.join(",") || "none" });
    deps.onConditions?.(next);
  }

  function evict(
    pod: Pod,
    request: EvictRequest,
    cause: readonly PressureCondition[],
    label: string,
  ): boolean {
    if (isCriticalPod(pod)) {
      log.warn("cannot evict a critical pod", { pod: fullName(pod) });
      return false;
    }
    log.info("evicting pod", { pod: fullName(pod), message: request.message.trim() });
    evictions.set(label, (evictions.get(label) ?? 0) + 1);
    readmission.record(uidOf(pod), fullName(pod), cause, true, deps.clock.now());
    deps.evictPod(pod, request);
    return true;
  }

  /** Pods over their own local storage limits, evicted at once (all of them this cycle). */
  async function localStorageEviction(active: readonly Pod[]): Promise<Pod[]> {
    const limited = active.filter(hasLocalStorageLimit);
    if (limited.length === 0) return [];
    // Writable layers count only towards ephemeral-storage limits (pod and container).
    const layers = limited.some((p) =>
      p.spec.containers.some((c) => c.resources?.limits?.["ephemeral-storage"] !== undefined),
    );
    const usage = await deps.podUsage(limited, { logs: true, volumes: true, containers: layers });
    const imageFs = await isDedicated();
    const evicted: Pod[] = [];
    for (const pod of limited) {
      const u = usage.get(uidOf(pod));
      const violation = u && localStorageViolation(pod, u, imageFs);
      if (!violation) continue;
      const request = {
        gracePeriodSeconds: IMMEDIATE_GRACE_SECONDS,
        message: violation.message,
        disruption: false,
      };
      if (evict(pod, request, [], violation.limit)) evicted.push(pod);
    }
    return evicted;
  }

  async function isDedicated(): Promise<boolean> {
    if (dedicated === undefined) dedicated = await deps.dedicatedImageFs();
    return dedicated;
  }

  /** Runs the node-level reclaim steps for the signal; true when that relieved every threshold. */
  async function reclaimNodeLevel(signal: Signal): Promise<boolean> {
    const steps = deps.reclaim ? reclaimSteps(signal, await isDedicated()) : [];
    if (steps.length === 0 || deps.reclaim === undefined) return false;
    for (const step of steps) {
      await deps.reclaim[step]().catch((error) =>
        log.warn("node-level reclaim failed", { step, signal, error }),
      );
    }
    const after = await observe();
    return thresholdsMet(deps.thresholds, after, true).length === 0;
  }

  function gracePeriod(pod: Pod, t: Threshold): number {
    if (isHardThreshold(t)) return IMMEDIATE_GRACE_SECONDS;
    const own = pod.spec.terminationGracePeriodSeconds ?? 30;
    const max = deps.maxPodGracePeriodSeconds;
    return Math.max(IMMEDIATE_GRACE_SECONDS, max > 0 ? Math.min(max, own) : own);
  }

  /** What ranking for `signal` compares: the pod cgroups for memory and PIDs (the runtime's
   * container figures when pods have no cgroups), the parts of local storage on the signal's
   * filesystem for disk. */
  async function rankingUsage(signal: Signal, active: Pod[]): Promise<Map<string, PodUsage>> {
    if (signal === "pid.available") return deps.podUsage(active, { processes: true });
    if (isMemorySignal(signal)) {
      const usage = await deps.podUsage(active, { memory: true });
      const missing = active.some((p) => usage.get(uidOf(p))?.memory === undefined);
      return missing ? deps.podUsage(active, { memory: true, containers: true }) : usage;
    }
    const parts = diskParts(signal, await isDedicated());
    return deps.podUsage(active, {
      logs: parts.logs,
      volumes: parts.volumes,
      containers: parts.rootfs,
    });
  }

  /** Ranks the active pods for the plan's threshold and evicts the first that may be. */
  async function evictOne(plan: CyclePlan, obs: Observations, active: Pod[]): Promise<Pod[]> {
    const target = plan.reclaim;
    if (target === undefined) return [];
    const signal = target.threshold.signal;
    const usage = await rankingUsage(signal, active);
    const ranked = rankPods(signal, active, (p) => usage.get(uidOf(p)), await isDedicated());
    for (const pod of ranked) {
      if (isCriticalPod(pod)) {
        log.warn("cannot evict a critical pod", { pod: fullName(pod) });
        continue;
      }
      // The message names the containers over their request: their own figures, read for this
      // one pod.
      const detail = (await deps.podUsage([pod], { containers: true, logs: true })).get(uidOf(pod));
      const message = evictionMessage(target.resource, pod, detail, plan, obs);
      const request = {
        gracePeriodSeconds: gracePeriod(pod, target.threshold),
        message,
        disruption: true,
      };
      if (evict(pod, request, [SIGNAL_CONDITION[signal]], signal)) return [pod];
    }
    log.warn("unable to evict any pods from the node", { signal });
    return [];
  }

  async function synchronize(): Promise<Pod[]> {
    const obs = await observe();
    const now = deps.clock.now();
    const plan = planCycle({
      thresholds: deps.thresholds,
      observations: obs,
      state,
      now,
      pressureTransitionMs: deps.pressureTransitionMs,
    });
    state = plan.state;
    setConditions(plan.conditions);
    const active = deps.activePods();
    const local = await localStorageEviction(active);
    if (local.length > 0) return local;
    if (plan.reclaim === undefined) return [];
    const { threshold, resource } = plan.reclaim;
    log.info("attempting to reclaim", { resource, signal: threshold.signal });
    deps.nodeEvent("Warning", "EvictionThresholdMet", `Attempting to reclaim ${resource}`);
    if (await reclaimNodeLevel(threshold.signal)) {
      log.info("reduced resource pressure without evicting pods", { resource });
      return [];
    }
    if (active.length === 0) {
      log.warn("eviction thresholds have been met, but no pods are active to evict");
      return [];
    }
    return evictOne(plan, obs, active);
  }

  async function waitForCleanup(pods: readonly Pod[], signal?: AbortSignal): Promise<void> {
    const deadline = deps.clock.now() + POD_CLEANUP_TIMEOUT_MS;
    while (deps.clock.now() < deadline && !signal?.aborted) {
      await deps.clock.sleep(POD_CLEANUP_POLL_MS, signal).catch(() => undefined);
      if (pods.every((p) => deps.podCleanedUp(uidOf(p)))) return;
    }
    if (!signal?.aborted)
      log.warn("timed out waiting for evicted pods to be cleaned up", {
        pods: pods.map(fullName).join(","),
      });
  }

  return {
    synchronize,
    waitForCleanup,
    conditions: () => conditions,
    admit(pod) {
      const failure = admitUnderPressure(pod, conditions);
      if (failure !== undefined)
        readmission.record(uidOf(pod), fullName(pod), conditions, false, deps.clock.now());
      return failure;
    },
    readmissionsDue: () =>
      readmission.due(
        (c) => (conditions.includes(c) ? undefined : (falseSince.get(c) ?? started)),
        deps.clock.now(),
      ),
    forgetReadmission: (uid) => readmission.forget(uid),
    evictions: () => evictions,
    async run(signal) {
      while (!signal.aborted) {
        let evicted: Pod[] = [];
        try {
          evicted = await synchronize();
        } catch (error) {
          log.error("eviction cycle failed; trying again next period", { error });
        }
        if (evicted.length > 0) await waitForCleanup(evicted, signal);
        else await deps.clock.sleep(deps.monitoringPeriodMs, signal).catch(() => undefined);
      }
    },
  };
}
