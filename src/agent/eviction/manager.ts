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
import { type Clock, sleepQuietly } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import {
  isMemorySignal,
  type Observation,
  type Observations,
  type PressureCondition,
  SIGNAL_CONDITION,
  type Signal,
} from "../evictionapi/signals.ts";
import { isHardThreshold, type Threshold } from "../evictionapi/thresholds.ts";
import { admitUnderPressure } from "./admission.ts";
import {
  type EmptyDirLimit,
  hasLocalStorageLimit,
  localStorageViolation,
  specEmptyDirLimits,
} from "./local-storage.ts";
import { evictionMessage } from "./message.ts";
import {
  type CyclePlan,
  type EvictionState,
  INITIAL_STATE,
  planCycle,
  reclaimSteps,
  thresholdsMet,
} from "./plan.ts";
import type { StatsWanted } from "./pod-stats.ts";
import { diskParts, isCriticalPod, rankPods } from "./rank.ts";
import { createReadmission, type Readmission } from "./readmission.ts";
import type { PodUsage } from "./usage.ts";

const POD_CLEANUP_TIMEOUT_MS = 30_000;
const POD_CLEANUP_POLL_MS = 1000;
/** The grace period of a hard or local storage eviction (the kubelet's immediate eviction). */
const IMMEDIATE_GRACE_SECONDS = 1;

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
  /** The pod's disk-backed emptyDirs with a sizeLimit (the volume manager's); absent: read from
   * the pod's spec. */
  emptyDirLimits?: (pod: Pod) => EmptyDirLimit[];
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
  return new Eviction(deps);
}

class Eviction implements EvictionManager {
  private readonly log: Logger;
  private readonly readmission: Readmission;
  /** The signals some threshold reads. */
  private readonly signals: ReadonlySet<Signal>;
  private state: EvictionState = INITIAL_STATE;
  private current: readonly PressureCondition[] = [];
  /** When each condition last became False (monotonic ms); all are False from the start. */
  private readonly falseSince = new Map<PressureCondition, number>();
  private readonly started: number;
  /** The last error of each signal that could not be read (reported once). */
  private readonly unreadable = new Map<Signal, string>();
  /** Whether the image filesystem is a separate one; measured once. */
  private dedicated: boolean | undefined;
  private readonly evicted = new Map<string, number>();

  constructor(private readonly deps: EvictionManagerDeps) {
    this.log = deps.logger;
    this.readmission = createReadmission({ transitionMs: deps.pressureTransitionMs });
    this.signals = new Set(deps.thresholds.map((t) => t.signal));
    this.started = deps.clock.monotonic();
  }

  conditions(): readonly PressureCondition[] {
    return this.current;
  }

  evictions(): ReadonlyMap<string, number> {
    return this.evicted;
  }

  admit(pod: Pod): { reason: string; message: string } | undefined {
    const failure = admitUnderPressure(pod, this.current);
    if (failure !== undefined)
      this.readmission.record(
        uidOf(pod),
        fullName(pod),
        this.current,
        false,
        this.deps.clock.monotonic(),
      );
    return failure;
  }

  readmissionsDue(): string[] {
    const falseSince = (c: PressureCondition) =>
      this.current.includes(c) ? undefined : (this.falseSince.get(c) ?? this.started);
    return this.readmission.due(falseSince, this.deps.clock.monotonic());
  }

  forgetReadmission(uid: string): void {
    this.readmission.forget(uid);
  }

  async synchronize(): Promise<Pod[]> {
    const obs = await this.observe();
    const plan = planCycle({
      thresholds: this.deps.thresholds,
      observations: obs,
      state: this.state,
      now: this.deps.clock.monotonic(),
      pressureTransitionMs: this.deps.pressureTransitionMs,
    });
    this.state = plan.state;
    this.setConditions(plan.conditions);
    const active = this.deps.activePods();
    const local = await this.localStorageEviction(active);
    if (local.length > 0) return local;
    if (plan.reclaim === undefined) return [];
    const { threshold, resource } = plan.reclaim;
    this.log.info("attempting to reclaim", { resource, signal: threshold.signal });
    this.deps.nodeEvent("Warning", "EvictionThresholdMet", `Attempting to reclaim ${resource}`);
    if (await this.reclaimNodeLevel(threshold.signal)) {
      this.log.info("reduced resource pressure without evicting pods", { resource });
      return [];
    }
    if (active.length === 0) {
      this.log.warn("eviction thresholds have been met, but no pods are active to evict");
      return [];
    }
    return this.evictOne(plan, obs, active);
  }

  async waitForCleanup(pods: readonly Pod[], signal?: AbortSignal): Promise<void> {
    const { clock } = this.deps;
    const deadline = clock.monotonic() + POD_CLEANUP_TIMEOUT_MS;
    while (clock.monotonic() < deadline && !signal?.aborted) {
      await sleepQuietly(clock, POD_CLEANUP_POLL_MS, signal);
      if (pods.every((p) => this.deps.podCleanedUp(uidOf(p)))) return;
    }
    if (!signal?.aborted)
      this.log.warn("timed out waiting for evicted pods to be cleaned up", {
        pods: pods.map(fullName).join(","),
      });
  }

  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      let evicted: Pod[] = [];
      try {
        evicted = await this.synchronize();
      } catch (error) {
        this.log.error("eviction cycle failed; trying again next period", { error });
      }
      if (evicted.length > 0) await this.waitForCleanup(evicted, signal);
      else await sleepQuietly(this.deps.clock, this.deps.monitoringPeriodMs, signal);
    }
  }

  private async observe(): Promise<Observations> {
    const { observations, errors } = await this.deps.observe(this.signals);
    for (const [signal, error] of errors) {
      if (this.unreadable.get(signal) !== error)
        this.log.warn("cannot read an eviction signal; going on without it", { signal, error });
      this.unreadable.set(signal, error);
    }
    for (const signal of observations.keys()) {
      if (this.unreadable.delete(signal))
        this.log.info("eviction signal readable again", { signal });
    }
    return observations;
  }

  private setConditions(next: readonly PressureCondition[]): void {
    const now = this.deps.clock.monotonic();
    const before = this.current;
    for (const c of before) if (!next.includes(c)) this.falseSince.set(c, now);
    this.current = next;
    if (next.length === before.length && next.every((c) => before.includes(c))) return;
    this.log.info("node pressure conditions changed", { conditions: next.join(",") || "none" });
    this.deps.onConditions?.(next);
  }

  private evict(
    pod: Pod,
    request: EvictRequest,
    cause: readonly PressureCondition[],
    label: string,
  ): boolean {
    if (isCriticalPod(pod)) {
      this.log.warn("cannot evict a critical pod", { pod: fullName(pod) });
      return false;
    }
    this.log.info("evicting pod", { pod: fullName(pod), message: request.message.trim() });
    this.evicted.set(label, (this.evicted.get(label) ?? 0) + 1);
    this.readmission.record(uidOf(pod), fullName(pod), cause, true, this.deps.clock.monotonic());
    this.deps.evictPod(pod, request);
    return true;
  }

  /** Pods over their own local storage limits, evicted at once (all of them this cycle). */
  private async localStorageEviction(active: readonly Pod[]): Promise<Pod[]> {
    const limitsOf = this.deps.emptyDirLimits ?? specEmptyDirLimits;
    const emptyDirs = new Map(active.map((p) => [uidOf(p), limitsOf(p)]));
    const limited = active.filter((p) => hasLocalStorageLimit(p, emptyDirs.get(uidOf(p)) ?? []));
    if (limited.length === 0) return [];
    // Writable layers count only towards ephemeral-storage limits (pod and container).
    const layers = limited.some((p) =>
      p.spec.containers.some((c) => c.resources?.limits?.["ephemeral-storage"] !== undefined),
    );
    const usage = await this.deps.podUsage(limited, {
      logs: true,
      volumes: true,
      containers: layers,
    });
    const imageFs = await this.isDedicated();
    const evicted: Pod[] = [];
    for (const pod of limited) {
      const u = usage.get(uidOf(pod));
      const violation = u && localStorageViolation(pod, u, imageFs, emptyDirs.get(uidOf(pod)));
      if (!violation) continue;
      const request = {
        gracePeriodSeconds: IMMEDIATE_GRACE_SECONDS,
        message: violation.message,
        disruption: false,
      };
      if (this.evict(pod, request, [], violation.limit)) evicted.push(pod);
    }
    return evicted;
  }

  private async isDedicated(): Promise<boolean> {
    if (this.dedicated === undefined) this.dedicated = await this.deps.dedicatedImageFs();
    return this.dedicated;
  }

  /** Runs the node-level reclaim steps for the signal; true when that relieved every threshold. */
  private async reclaimNodeLevel(signal: Signal): Promise<boolean> {
    const { reclaim } = this.deps;
    const steps = reclaim ? reclaimSteps(signal, await this.isDedicated()) : [];
    if (steps.length === 0 || reclaim === undefined) return false;
    for (const step of steps) {
      await reclaim[step]().then(
        (freed) => this.log.info("node-level reclaim", { step, signal, freed }),
        (error) => this.log.warn("node-level reclaim failed", { step, signal, error }),
      );
    }
    const after = await this.observe();
    return thresholdsMet(this.deps.thresholds, after, true).length === 0;
  }

  private gracePeriod(pod: Pod, t: Threshold): number {
    if (isHardThreshold(t)) return IMMEDIATE_GRACE_SECONDS;
    const own = pod.spec.terminationGracePeriodSeconds ?? 30;
    const max = this.deps.maxPodGracePeriodSeconds;
    return Math.max(IMMEDIATE_GRACE_SECONDS, max > 0 ? Math.min(max, own) : own);
  }

  /** What ranking for `signal` compares: the pod cgroups for memory and PIDs (the runtime's
   * container figures when pods have no cgroups), the parts of local storage on the signal's
   * filesystem for disk. */
  private async rankingUsage(signal: Signal, active: Pod[]): Promise<Map<string, PodUsage>> {
    const { podUsage } = this.deps;
    if (signal === "pid.available") return podUsage(active, { processes: true });
    if (isMemorySignal(signal)) {
      const usage = await podUsage(active, { memory: true });
      const missing = active.some((p) => usage.get(uidOf(p))?.memory === undefined);
      return missing ? podUsage(active, { memory: true, containers: true }) : usage;
    }
    const parts = diskParts(signal, await this.isDedicated());
    return podUsage(active, {
      logs: parts.logs,
      volumes: parts.volumes,
      containers: parts.rootfs,
    });
  }

  /** Ranks the active pods for the plan's threshold and evicts the first that may be. */
  private async evictOne(plan: CyclePlan, obs: Observations, active: Pod[]): Promise<Pod[]> {
    const target = plan.reclaim;
    if (target === undefined) return [];
    const signal = target.threshold.signal;
    const usage = await this.rankingUsage(signal, active);
    const ranked = rankPods(signal, active, (p) => usage.get(uidOf(p)), await this.isDedicated());
    for (const pod of ranked) {
      if (isCriticalPod(pod)) {
        this.log.warn("cannot evict a critical pod", { pod: fullName(pod) });
        continue;
      }
      // The message names the containers over their request: their own figures, read for this
      // one pod.
      const detail = (await this.deps.podUsage([pod], { containers: true, logs: true })).get(
        uidOf(pod),
      );
      const request = {
        gracePeriodSeconds: this.gracePeriod(pod, target.threshold),
        message: evictionMessage(target.resource, pod, detail, plan, obs),
        disruption: true,
      };
      if (this.evict(pod, request, [SIGNAL_CONDITION[signal]], signal)) return [pod];
    }
    this.log.warn("unable to evict any pods from the node", { signal });
    return [];
  }
}
