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
import type { WorkerState } from "../podworkers/index.ts";
import { type PodUpdate as ConfigUpdate, objectsUsedBy } from "../sources/index.ts";
import { type AdmissionDeps, createAdmission } from "./admission.ts";
import { type HousekeepingDeps, housekeeping } from "./housekeeping.ts";
import { PodRecord, uidOf } from "./pods.ts";
import { type LoopInput, selectLoop } from "./select.ts";

export type { AdmitFailure, AdmitHandler } from "./admission.ts";

export interface SyncLoopDeps
  extends Omit<AdmissionDeps, "logger" | "activePods">,
    Omit<HousekeepingDeps, "logger" | "activePods"> {
  clock: Clock;
  logger: Logger;
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
  /** Marks a pod to sync again after `delayMs`. */
  requeue(uid: string, delayMs: number): void;
  /** Pods a source wants (admitted or not), by UID. */
  pods(): Map<string, Pod>;
  /** The pods to show: known ones, and removed ones until they finished terminating. */
  visiblePods(): Pod[];
  run(signal: AbortSignal): Promise<void>;
}

export function createSyncLoop(deps: SyncLoopDeps): SyncLoop {
  const log = deps.logger;
  const record = new PodRecord();
  /** Admitted pods that are not terminated. */
  const activePods = () =>
    record.admitted().filter((p) => deps.workerState(uidOf(p)) !== "terminated");
  const admission = createAdmission({ ...deps, activePods }, record);
  const sync = (pod: Pod) => deps.updatePod({ pod, type: "sync" });
  /** The objects a pod reads, once per (frozen) pod. */
  const usedObjects = memoizeFrozen(objectsUsedBy);

  function removePods(pods: readonly Pod[]): void {
    for (const pod of pods) {
      const uid = uidOf(pod);
      deps.readmissions?.forget(uid);
      if (record.remove(uid)) {
        deps.removeStatus(uid);
        continue;
      }
      deps.updatePod({ pod: record.markRemoving(pod, deps.clock.now()), type: "kill" });
    }
  }

  /** Admits again a pod whose eviction (or pressure rejection) wait is over: a new instance. */
  function readmit(uid: string): void {
    const pod = record.known.get(uid);
    if (pod === undefined) {
      deps.readmissions?.forget(uid);
      return;
    }
    if (deps.couldHaveRunningContainers(uid)) return; // still stopping: next housekeeping
    if (deps.workerState(uid) !== undefined && !deps.forgetWorker(uid)) return;
    deps.readmissions?.forget(uid);
    deps.removeStatus(uid);
    deps.forgetCache(uid);
    log.info("admitting a pod again: the node pressure it waited on is over", {
      pod: pod.metadata.name,
    });
    deps.event(pod, "Normal", "Readmitted", "The node pressure is over: admitting the pod again");
    admission.admit(pod);
  }

  const loop: SyncLoop = {
    pods: () => record.known,
    visiblePods: () => record.visible((uid) => deps.couldHaveRunningContainers(uid)),

    handleConfigUpdate(update) {
      switch (update.op) {
        case "ADD":
          admission.addPods(update.pods);
          break;
        case "UPDATE":
          for (const pod of update.pods) {
            record.known.set(uidOf(pod), pod);
            if (!record.rejected.has(uidOf(pod))) deps.updatePod({ pod, type: "update" });
          }
          break;
        case "REMOVE":
        case "DELETE":
          removePods(update.pods);
          break;
        case "RECONCILE":
          for (const pod of update.pods) record.known.set(uidOf(pod), pod);
          break;
      }
    },

    handlePLEGEvent(event) {
      const pod = record.known.get(event.uid);
      if (pod === undefined || record.rejected.has(event.uid) || !deps.runtimeHealthy()) return;
      sync(pod);
    },

    handleObjectsChanged(keys) {
      if (!deps.runtimeHealthy()) return;
      for (const [uid, pod] of record.known) {
        if (record.rejected.has(uid)) continue;
        if ([...usedObjects(pod)].some((k) => keys.has(k))) sync(pod);
      }
    },

    requeue(uid, delayMs) {
      record.due.set(uid, deps.clock.now() + delayMs);
    },

    syncTick() {
      if (!deps.runtimeHealthy()) return;
      for (const uid of record.takeDue(deps.clock.now())) {
        const pod = record.known.get(uid);
        if (pod !== undefined && !record.rejected.has(uid)) sync(pod);
      }
    },

    async housekeeping() {
      await housekeeping({ ...deps, activePods }, record);
      if (deps.seenAllSources() && deps.runtimeHealthy())
        for (const uid of deps.readmissions?.due() ?? []) readmit(uid);
    },

    run: (signal) => runLoop(loop, deps, signal),
  };
  return loop;
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
