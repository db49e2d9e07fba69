// The sync loop (the kubelet's syncLoop): one loop over its inputs (select.ts) — pod updates
// from the sources, PLEG events, a sync tick for pods due to sync again, and a housekeeping tick —
// turning each into pod worker updates. Admission (admission.ts) decides which new pods run;
// housekeeping (housekeeping.ts) cleans up after pods no source wants and readmits evicted pods
// whose wait is over. Each input has an iteration method that tests call directly.
//
// Invariants:
// - Nothing is dispatched while the runtime is unhealthy; the loop backs off and reports why.
// - Orphans (runtime pods no source wants) are removed only after every source was seen once,
//   so a restarted agent never stops pods before it has read the manifest folder.
// - A rejected or evicted pod never runs again unless readmitted through admission.
import type { Pod } from "../../api/types.ts";
import type { Clock } from "../../util/clock.ts";
import { memoizeFrozen } from "../../util/freeze.ts";
import type { Logger } from "../../util/log.ts";
import type { PodLifecycleEvent } from "../pleg/index.ts";
import type { PodManager } from "../podmanager/index.ts";
import type { WorkerState } from "../podworkers/index.ts";
import { type PodUpdate as ConfigUpdate, objectsUsedBy } from "../sources/index.ts";
import { type AdmissionDeps, createAdmission } from "./admission.ts";
import { type HousekeepingDeps, housekeeping } from "./housekeeping.ts";
import { PodRecord, uidOf } from "./pods.ts";
import { type LoopInput, selectLoop } from "./select.ts";
import type { WorkQueue } from "./work-queue.ts";

export { createWorkQueue } from "./work-queue.ts";

export interface SyncLoopDeps
  extends Omit<AdmissionDeps, "logger" | "activePods">,
    Omit<HousekeepingDeps, "logger" | "activePods"> {
  clock: Clock;
  logger: Logger;
  /** The pods the sources want; the loop writes it as their updates arrive. */
  podManager: PodManager;
  /** Pods due to sync again (the pod workers enqueue them). */
  workQueue: WorkQueue;
  nextConfigUpdate(signal: AbortSignal): Promise<ConfigUpdate>;
  nextPLEGEvent(signal: AbortSignal): Promise<PodLifecycleEvent>;
  workerState(uid: string): WorkerState | undefined;
  /** Drops a terminated worker so its UID can start again; false if it is busy. */
  forgetWorker(uid: string): boolean;
  /** Evicted or pressure-rejected pods whose wait is over (the eviction manager); absent: none. */
  readmissions?: { due(): string[]; forget(uid: string): void };
  syncTickMs?: number;
  housekeepingIntervalMs: number;
}

export interface SyncLoop {
  handleConfigUpdate(update: ConfigUpdate): void;
  handlePLEGEvent(event: PodLifecycleEvent): void;
  /** Syncs the pods that read any of the changed ConfigMaps or Secrets (keys: objectKeyOf). */
  handleObjectsChanged(keys: ReadonlySet<string>): void;
  /** Dispatches a sync for every pod whose requeue time has come. */
  syncTick(): void;
  /** Cleans up orphaned runtime pods, pod directories and statuses; readmits evicted pods. */
  housekeeping(): Promise<void>;
  run(signal: AbortSignal): Promise<void>;
}

export function createSyncLoop(deps: SyncLoopDeps): SyncLoop {
  return new Loop(deps);
}

class Loop implements SyncLoop {
  private readonly record: PodRecord;
  private readonly admission: ReturnType<typeof createAdmission>;
  /** The objects a pod reads, once per (frozen) pod. */
  private readonly usedObjects = memoizeFrozen(objectsUsedBy);

  constructor(private readonly deps: SyncLoopDeps) {
    this.record = new PodRecord(deps.podManager, deps.workQueue);
    this.admission = createAdmission({ ...deps, activePods: () => this.activePods() }, this.record);
  }

  handleConfigUpdate(update: ConfigUpdate): void {
    const { record, deps } = this;
    switch (update.op) {
      case "ADD":
        this.admission.addPods(update.pods);
        break;
      case "UPDATE":
        for (const pod of update.pods) {
          record.pods.setPod(pod);
          if (!record.rejected.has(uidOf(pod))) deps.updatePod({ pod, type: "update" });
        }
        break;
      case "REMOVE":
      case "DELETE":
        this.removePods(update.pods);
        break;
      case "RECONCILE":
        for (const pod of update.pods) record.pods.setPod(pod);
        break;
    }
  }

  handlePLEGEvent(event: PodLifecycleEvent): void {
    const pod = this.record.pods.pod(event.uid);
    if (pod === undefined || this.record.rejected.has(event.uid)) return;
    if (this.deps.runtimeHealthy()) this.sync(pod);
  }

  handleObjectsChanged(keys: ReadonlySet<string>): void {
    if (!this.deps.runtimeHealthy()) return;
    for (const [uid, pod] of this.record.pods.pods()) {
      if (this.record.rejected.has(uid)) continue;
      if ([...this.usedObjects(pod)].some((k) => keys.has(k))) this.sync(pod);
    }
  }

  syncTick(): void {
    if (!this.deps.runtimeHealthy()) return;
    for (const uid of this.record.queue.takeDue()) {
      const pod = this.record.pods.pod(uid);
      if (pod !== undefined && !this.record.rejected.has(uid)) this.sync(pod);
    }
  }

  async housekeeping(): Promise<void> {
    const { deps } = this;
    await housekeeping({ ...deps, activePods: () => this.activePods() }, this.record);
    if (deps.seenAllSources() && deps.runtimeHealthy())
      for (const uid of deps.readmissions?.due() ?? []) this.readmit(uid);
  }

  run(signal: AbortSignal): Promise<void> {
    return runLoop(this, this.deps, signal);
  }

  /** Admitted pods that are not terminated. */
  private activePods(): Pod[] {
    return this.record.admitted().filter((p) => this.deps.workerState(uidOf(p)) !== "terminated");
  }

  private sync(pod: Pod): void {
    this.deps.updatePod({ pod, type: "sync" });
  }

  private removePods(pods: readonly Pod[]): void {
    const { record, deps } = this;
    for (const pod of pods) {
      const uid = uidOf(pod);
      deps.readmissions?.forget(uid);
      if (record.remove(uid)) {
        deps.removeStatus(uid);
        continue;
      }
      deps.updatePod({ pod: record.pods.markRemoving(pod, deps.clock.now()), type: "kill" });
    }
  }

  /** Admits again a pod whose eviction (or pressure rejection) wait is over: a new instance. */
  private readmit(uid: string): void {
    const { deps } = this;
    const pod = this.record.pods.pod(uid);
    if (pod === undefined) {
      deps.readmissions?.forget(uid);
      return;
    }
    if (deps.couldHaveRunningContainers(uid)) return; // still stopping: next housekeeping
    if (deps.workerState(uid) !== undefined && !deps.forgetWorker(uid)) return;
    deps.readmissions?.forget(uid);
    deps.removeStatus(uid);
    deps.forgetCache(uid);
    deps.logger.info("admitting a pod again: the node pressure it waited on is over", {
      pod: pod.metadata.name,
    });
    deps.event(pod, "Normal", "Readmitted", "The node pressure is over: admitting the pod again");
    this.admission.admit(pod);
  }
}

/** The loop's inputs, until `signal` aborts; waits for a housekeeping in flight at the end. */
async function runLoop(loop: SyncLoop, deps: SyncLoopDeps, signal: AbortSignal): Promise<void> {
  let housekeeping: Promise<void> = Promise.resolve();
  const inputs: LoopInput<unknown>[] = [
    {
      what: "pod update",
      next: (s) => deps.nextConfigUpdate(s),
      handle: (u) => loop.handleConfigUpdate(u as ConfigUpdate),
    },
    {
      what: "PLEG event",
      next: (s) => deps.nextPLEGEvent(s),
      handle: (e) => loop.handlePLEGEvent(e as PodLifecycleEvent),
    },
    {
      what: "sync tick",
      next: (s) => deps.clock.sleep(deps.syncTickMs ?? 1000, s),
      handle: () => loop.syncTick(),
    },
    {
      // The next tick is counted from the end of the last housekeeping, which runs beside the
      // loop so that a slow runtime listing does not hold up pod updates.
      what: "housekeeping tick",
      next: async (s) => {
        await housekeeping;
        await deps.clock.sleep(deps.housekeepingIntervalMs, s);
      },
      handle: () => {
        housekeeping = loop
          .housekeeping()
          .catch((error) => deps.logger.error("housekeeping failed", { error }));
      },
    },
  ];
  await selectLoop(inputs, deps, signal);
  await housekeeping;
}
