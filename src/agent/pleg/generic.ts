// The generic PLEG (pod lifecycle event generator), as kubelet's: every relist period it lists
// all pods and containers in the runtime, compares each container's state with the previous
// relist, sends one event per change to a bounded queue the sync loop reads, and refreshes the
// pod cache for the pods that changed. The runtime's container events (notify()) make it relist
// at once, so that an exit is seen within milliseconds; while they flow, the periodic relist is
// the safety net and runs every evented period instead (schedule.ts, docs/kubelet-differences.md).
//
// Invariants: a pod's record advances only after its status was read, so a pod whose status
// read failed produces the same events again at the next relist; ContainerChanged events (a
// container in the created or unknown state) refresh the cache but are not sent, as in kubelet;
// relist() and run() never throw.
//
// Fewer status reads than kubelet's PLEG, same events (each read is four CRI calls, and a burst
// of new pods on a small device is bound by the runtime's CPU):
// - a changed pod whose cached status already shows every listed container and sandbox in its
//   listed state (the sync loop read it right after acting) is not read again: the cached status
//   is confirmed as of this relist;
// - a changed pod the sync loop is acting on, and will read itself when done (`readPending`),
//   is left for the next relist: its record does not advance, so the same events come then;
// - the events of a pod whose cached status the listing confirms, when that status is one a sync
//   read back after acting and found nothing more to do with (`settledBySync`), are not sent:
//   the sync they would start could only find the same (fewer wake-ups, no change of outcome).

import type { ContainerEvent } from "../../cri/index.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import type { PodStatus } from "../kubecontainer/types.ts";
import { createPodCache, type PodCache } from "./cache.ts";
import {
  advance,
  computeEvents,
  keepPodIPs,
  matchesListing,
  type PodLifecycleEvent,
  type PodRecord,
  type RelistPod,
  setCurrent,
} from "./diff.ts";
import { type BoundedQueue, createBoundedQueue } from "./queue.ts";
import { RelistScheduler } from "./schedule.ts";

export interface PLEGDeps {
  clock: Clock;
  logger: Logger;
  /** Time between the end of one relist and the start of the next (kubelet: 1s). */
  relistPeriodMs: number;
  /** The same while the runtime's event stream flows (default: relistPeriodMs). */
  eventedRelistPeriodMs?: number;
  /** healthy() is false when the last successful relist is older (kubelet: 3 minutes). */
  relistThresholdMs?: number;
  /** Events kept for the reader before new ones are dropped (kubelet: 1000). */
  eventCapacity?: number;
  /** All pods in the runtime, running or not. */
  listPods: () => Promise<RelistPod[]>;
  getPodStatus: (uid: string, name: string, namespace: string) => Promise<PodStatus>;
  /** Whether the sync loop is acting on the pod and reads its status when done; such a pod's
   * changes are taken at the next relist. */
  readPending?: (uid: string) => boolean;
  /** Whether `status` is the pod's status as a sync read it after acting, with nothing more to
   * do; events that this status already shows are then not sent. */
  settledBySync?: (uid: string, status: PodStatus) => boolean;
  /** Defaults to a new cache. */
  cache?: PodCache;
}

export interface PLEG {
  /** One relist; resolves when done (concurrent calls share the relist in progress). */
  relist(): Promise<void>;
  /** Relists until `signal` aborts. */
  run(signal: AbortSignal): Promise<void>;
  /** The next event, waiting if there is none; rejects with the signal's reason on abort. */
  next(signal?: AbortSignal): Promise<PodLifecycleEvent>;
  /** Events until `signal` aborts. */
  events(signal?: AbortSignal): AsyncIterableIterator<PodLifecycleEvent>;
  readonly cache: PodCache;
  /** Stores a status the caller just read (e.g. after starting containers), so that readers
   * see it at once; ignored when the cache holds a newer one. Returns whether it was stored. */
  updateCache(uid: string, status: PodStatus): boolean;
  /** False before the first successful relist and when the last one is older than the
   * threshold. */
  healthy(): boolean;
  /** Why healthy() is false, or undefined. */
  healthMessage(): string | undefined;
  /** Start of the last successful relist (monotonic ms), if any. */
  lastRelistTime(): number | undefined;
  /** Events dropped because the reader fell behind. */
  droppedEvents(): number;
  /** Durations of the relists so far (by the injected clock). */
  relistStats(): RelistStats;
  /** A container event from the runtime: relists at once, and again shortly while the listing
   * does not show it yet (a runtime may publish an event before its listing has it). */
  notify(event: ContainerEvent): void;
  /** The runtime's event stream opened (a relist runs at once; after one relist period the
   * evented period applies) or ended (the relist period applies again). */
  setEventsFlowing(flowing: boolean): void;
}

export interface RelistStats {
  /** Relists that listed the runtime successfully. */
  count: number;
  /** Sum of their durations (ms). */
  totalMs: number;
  /** Duration of the last one (ms), if any. */
  lastMs: number | undefined;
  /** Container events received, and those that asked for a relist. */
  events: number;
  eventRelists: number;
}

const DEFAULT_RELIST_THRESHOLD_MS = 3 * 60 * 1000;
const DEFAULT_EVENT_CAPACITY = 1000;

export function createPLEG(deps: PLEGDeps): PLEG {
  return new GenericPLEG(deps);
}

class GenericPLEG implements PLEG {
  readonly cache: PodCache;
  private readonly queue: BoundedQueue<PodLifecycleEvent>;
  private readonly threshold: number;
  /** Per pod: the listing its last emitted events were computed against, and the newest. */
  private readonly records = new Map<string, PodRecord>();
  /** Pods whose status read failed in the last relist. */
  private toReinspect = new Set<string>();
  private relistTime: number | undefined;
  private inflight: Promise<void> | undefined;
  private readonly stats: RelistStats = {
    count: 0,
    totalMs: 0,
    lastMs: undefined,
    events: 0,
    eventRelists: 0,
  };
  private readonly schedule: RelistScheduler;

  constructor(private readonly deps: PLEGDeps) {
    this.cache = deps.cache ?? createPodCache();
    this.queue = createBoundedQueue(deps.eventCapacity ?? DEFAULT_EVENT_CAPACITY);
    this.threshold = deps.relistThresholdMs ?? DEFAULT_RELIST_THRESHOLD_MS;
    const evented = deps.eventedRelistPeriodMs ?? deps.relistPeriodMs;
    this.schedule = new RelistScheduler(deps.relistPeriodMs, evented);
  }

  relist(): Promise<void> {
    this.inflight ??= this.relistOnce()
      .catch((error) => this.deps.logger.error("PLEG relist failed", { error }))
      .finally(() => {
        this.inflight = undefined;
      });
    return this.inflight;
  }

  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await this.relist();
      await this.schedule.wait(this.deps.clock, signal);
    }
  }

  notify(event: ContainerEvent): void {
    this.stats.events++;
    if (this.schedule.notify(event, this.deps.clock.monotonic())) this.stats.eventRelists++;
  }

  setEventsFlowing(flowing: boolean): void {
    this.schedule.setFlowing(flowing, this.deps.clock.monotonic());
  }

  next(signal?: AbortSignal): Promise<PodLifecycleEvent> {
    return this.queue.next(signal);
  }

  events(signal?: AbortSignal): AsyncIterableIterator<PodLifecycleEvent> {
    return this.queue.iterate(signal);
  }

  updateCache(uid: string, status: PodStatus): boolean {
    return this.cache.set(uid, status, status.timestamp || this.deps.clock.monotonic());
  }

  healthy(): boolean {
    return this.healthMessage() === undefined;
  }

  healthMessage(): string | undefined {
    if (this.relistTime === undefined) return "PLEG has not relisted successfully yet";
    const now = this.deps.clock.monotonic();
    const elapsed = now - this.relistTime;
    // A long evented period must not make a PLEG that relists on time look stuck.
    const threshold = Math.max(this.threshold, 2 * this.schedule.period(now));
    if (elapsed <= threshold) return undefined;
    const secs = (ms: number) => `${Math.round(ms / 1000)}s`;
    return `PLEG was last seen active ${secs(elapsed)} ago; threshold is ${secs(threshold)}`;
  }

  lastRelistTime(): number | undefined {
    return this.relistTime;
  }

  droppedEvents(): number {
    return this.queue.dropped;
  }

  relistStats(): RelistStats {
    return { ...this.stats };
  }

  private async relistOnce(): Promise<void> {
    const timestamp = this.deps.clock.monotonic();
    let pods: RelistPod[];
    try {
      pods = await this.deps.listPods();
    } catch (error) {
      this.deps.logger.error("Cannot list pods from the runtime", { error });
      this.schedule.relisted(undefined, this.deps.clock.monotonic());
      return;
    }
    this.relistTime = timestamp;
    setCurrent(this.records, pods);
    const needsReinspection = new Set<string>();
    /** Changes left for the next relist (a pod a sync is acting on). */
    let deferred = false;
    for (const [uid, record] of [...this.records]) {
      const events = computeEvents(uid, record.old, record.current);
      if (events.length === 0 && !this.toReinspect.has(uid)) {
        if (!record.current) this.records.delete(uid);
        continue;
      }
      if (record.current && this.deps.readPending?.(uid)) {
        if (this.toReinspect.has(uid)) needsReinspection.add(uid);
        deferred = true;
        continue;
      }
      const inspected = await this.inspect(uid, record.current, timestamp);
      if (inspected === "failed") {
        needsReinspection.add(uid);
        continue;
      }
      advance(this.records, uid, record);
      if (inspected !== "settled") this.emit(events);
    }
    this.cache.updateTime(timestamp);
    this.toReinspect = needsReinspection;
    // Changes left for later are taken within a relist period, whatever the evented period.
    this.schedule.relisted(
      pods,
      this.deps.clock.monotonic(),
      deferred || needsReinspection.size > 0,
    );
    const took = this.deps.clock.monotonic() - timestamp;
    this.stats.count++;
    this.stats.totalMs += took;
    this.stats.lastMs = took;
  }

  /** Reads the pod's status into the cache, unless the cached one matches the listing taken at
   * `listedAt` ("settled" when a sync read that status and found nothing to do with it);
   * "failed" when the read failed. */
  private async inspect(
    uid: string,
    pod: RelistPod | undefined,
    listedAt: number,
  ): Promise<"read" | "confirmed" | "settled" | "failed"> {
    if (!pod) {
      this.cache.delete(uid);
      return "read";
    }
    const cached = this.cache.get(uid);
    if (cached?.status && cached.error === undefined && matchesListing(cached.status, pod)) {
      this.cache.set(uid, cached.status, listedAt);
      return this.deps.settledBySync?.(uid, cached.status) ? "settled" : "confirmed";
    }
    const timestamp = this.deps.clock.monotonic();
    const previous = cached?.status;
    try {
      const status = await this.deps.getPodStatus(uid, pod.name, pod.namespace);
      this.cache.set(uid, keepPodIPs(previous, status), timestamp);
      return "read";
    } catch (error) {
      const err = error instanceof Error ? error : new Error(String(error));
      this.deps.logger.error("Cannot read the status of pod from the runtime", {
        pod: `${pod.namespace}/${pod.name}`,
        uid,
        error: err,
      });
      this.cache.set(uid, previous, timestamp, err);
      return "failed";
    }
  }

  private emit(events: PodLifecycleEvent[]): void {
    for (const event of events) {
      if (event.type === "ContainerChanged") continue;
      if (!this.queue.push(event)) {
        this.deps.logger.warn("PLEG event queue is full; dropping event", { ...event });
      }
    }
  }
}
