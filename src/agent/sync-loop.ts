// The sync loop (kubelet's syncLoop): turns config updates, PLEG events, the periodic resync and
// housekeeping into pod worker updates. Each input has an iteration method that tests call
// directly; run() drives them until aborted and never throws.
//
// Invariants:
// - Nothing is dispatched while the runtime is unhealthy; the loop backs off and reports why.
// - Orphans (runtime pods no source wants) are removed only after every source was seen once,
//   so a restarted agent never stops pods before it has read the manifest folder.
import { join } from "node:path";
import type { Pod } from "../api/types.ts";
import type { Clock } from "../util/clock.ts";
import { deepFreeze, memoizeFrozen } from "../util/freeze.ts";
import type { Logger } from "../util/log.ts";
import type { EventRecorder } from "./events/index.ts";
import { podRef } from "./events/index.ts";
import type { RunningPod } from "./kubecontainer/types.ts";
import { podUidOfLogDir, removeOrphanDirs } from "./orphan-dirs.ts";
import type { PodLifecycleEvent } from "./pleg/index.ts";
import type { PodRuntime, PodSync } from "./pod-sync.ts";
import type { PodWorkers } from "./podworkers/index.ts";
import { type PodUpdate as ConfigUpdate, objectsUsedBy, type PodConfig } from "./sources/index.ts";
import type { StatusManager } from "./status/index.ts";

export interface SyncLoopDeps {
  clock: Clock;
  logger: Logger;
  podConfig: PodConfig;
  workers: PodWorkers;
  podSync: PodSync;
  runtime: PodRuntime;
  statusManager: StatusManager;
  recorder: EventRecorder;
  rootDir: string;
  /** Pod log folders of pods gone are removed from here; absent: none are. */
  podLogsDir?: string;
  maxPods: number;
  /** Is the container runtime usable now (CRI Status answered and ready, PLEG relisting)? */
  runtimeHealthy(): boolean;
  nextPLEGEvent(signal: AbortSignal): Promise<PodLifecycleEvent>;
  /** Forgets a pod's cached runtime status. */
  forgetCache(uid: string): void;
  /** The runtime's pods for housekeeping; may be a listing a moment old (default: a fresh one). */
  runtimePods?: () => Promise<RunningPod[]>;
  syncTickMs?: number;
  housekeepingIntervalMs: number;
  /** Removes an orphaned pod folder, unmounting its volumes first (the volume manager);
   * absent: the folder is removed as it is. */
  removePodDir?: (uid: string) => Promise<unknown>;
  /** Resource admission and cgroup housekeeping (the container manager); absent: none. */
  resources?: {
    /** Why `pod` does not fit next to the `active` pods (kubelet's reason), or undefined. */
    admit(pod: Pod, active: readonly Pod[]): { reason: string; message: string } | undefined;
    /** Updates QoS cgroups and removes those of pods that are neither active nor `keep`. */
    housekeeping(active: readonly Pod[], keep: (uid: string) => boolean): Promise<void>;
  };
}

export interface SyncLoop {
  handleConfigUpdate(update: ConfigUpdate): void;
  handlePLEGEvent(event: PodLifecycleEvent): void;
  /** Syncs the pods that read any of the changed ConfigMaps or Secrets (keys: objectKeyOf). */
  handleObjectsChanged(keys: ReadonlySet<string>): void;
  /** Dispatches a sync for every pod whose requeue time has come. */
  syncTick(): void;
  /** Cleans up orphaned runtime pods, pod and pod log folders, and statuses. */
  housekeeping(): Promise<void>;
  /** Marks a pod to sync again after `delayMs`. */
  requeue(uid: string, delayMs: number): void;
  /** Pods admitted and known, by UID. */
  pods(): Map<string, Pod>;
  /** The pods to show: known ones, and removed ones until they finished terminating. */
  visiblePods(): Pod[];
  run(signal: AbortSignal): Promise<void>;
}

const uidOf = (pod: Pod) => pod.metadata.uid as string;

export function createSyncLoop(deps: SyncLoopDeps): SyncLoop {
  const log = deps.logger;
  const known = new Map<string, Pod>();
  const rejected = new Set<string>();
  /** Pods removed by their source whose workers are still terminating them. */
  const removing = new Map<string, Pod>();
  const due = new Map<string, number>();
  /** The objects a pod reads, once per (frozen) pod. */
  const usedObjects = memoizeFrozen(objectsUsedBy);

  /** Admitted pods that are not terminated. */
  const activePods = () =>
    [...known.values()].filter(
      (p) => !rejected.has(uidOf(p)) && deps.workers.state(uidOf(p)) !== "terminated",
    );

  /** Admits `pod` next to the `active` pods; a refused pod is already known, so that its
   * Failed status is published with the pod in pods(). */
  function admit(pod: Pod, active: Pod[]): boolean {
    const failure =
      active.length < deps.maxPods
        ? deps.resources?.admit(pod, active)
        : {
            reason: "OutOfpods",
            message: `Node didn't have enough resource: pods, requested: 1, used: ${active.length}, capacity: ${deps.maxPods}`,
          };
    if (failure === undefined) return true;
    deps.podSync.reject(pod, failure.reason, failure.message);
    deps.recorder.event(podRef(pod), "Warning", failure.reason, failure.message);
    log.warn("pod rejected at admission", {
      pod: pod.metadata.name,
      reason: failure.reason,
      message: failure.message,
    });
    return false;
  }

  function handleAdd(pods: Pod[]): void {
    const sorted = [...pods].sort((a, b) =>
      (a.metadata.annotations?.["kubernetes.io/config.seen"] ?? "").localeCompare(
        b.metadata.annotations?.["kubernetes.io/config.seen"] ?? "",
      ),
    );
    for (const pod of sorted) {
      const uid = uidOf(pod);
      if (known.has(uid)) continue;
      const active = activePods();
      known.set(uid, pod);
      if (!admit(pod, active)) {
        rejected.add(uid);
        continue;
      }
      deps.workers.updatePod({ pod, type: "create" });
    }
  }

  function handleRemove(pods: Pod[]): void {
    for (const pod of pods) {
      const uid = uidOf(pod);
      known.delete(uid);
      due.delete(uid);
      if (rejected.delete(uid)) {
        deps.statusManager.removePod(uid);
        continue;
      }
      // Shown as Terminating until its worker is done, like a deleted pod in the kubelet. Frozen
      // like every pod from the pod config (the local API relies on it).
      const deleting: Pod = deepFreeze({
        ...pod,
        metadata: {
          ...pod.metadata,
          deletionTimestamp: new Date(deps.clock.now()).toISOString().replace(/\.\d{3}Z$/, "Z"),
          deletionGracePeriodSeconds: pod.spec.terminationGracePeriodSeconds ?? 30,
        },
      });
      removing.set(uid, deleting);
      deps.workers.updatePod({ pod: deleting, type: "kill" });
    }
  }

  function visiblePods(): Pod[] {
    for (const uid of removing.keys()) {
      if (!deps.workers.couldHaveRunningContainers(uid) || known.has(uid)) removing.delete(uid);
    }
    return [...known.values(), ...removing.values()];
  }

  return {
    pods: () => known,
    visiblePods,

    handleConfigUpdate(update) {
      switch (update.op) {
        case "ADD":
          handleAdd(update.pods);
          break;
        case "UPDATE":
          for (const pod of update.pods) {
            known.set(uidOf(pod), pod);
            if (!rejected.has(uidOf(pod))) deps.workers.updatePod({ pod, type: "update" });
          }
          break;
        case "REMOVE":
        case "DELETE":
          handleRemove(update.pods);
          break;
        case "RECONCILE":
          for (const pod of update.pods) known.set(uidOf(pod), pod);
          break;
      }
    },

    handlePLEGEvent(event) {
      const pod = known.get(event.uid);
      if (pod === undefined || rejected.has(event.uid)) return;
      if (!deps.runtimeHealthy()) return;
      deps.workers.updatePod({ pod, type: "sync" });
    },

    handleObjectsChanged(keys) {
      if (!deps.runtimeHealthy()) return;
      for (const [uid, pod] of known) {
        if (rejected.has(uid)) continue;
        if ([...usedObjects(pod)].some((k) => keys.has(k)))
          deps.workers.updatePod({ pod, type: "sync" });
      }
    },

    requeue(uid, delayMs) {
      due.set(uid, deps.clock.now() + delayMs);
    },

    syncTick() {
      if (!deps.runtimeHealthy()) return;
      const now = deps.clock.now();
      for (const [uid, at] of due) {
        if (at > now) continue;
        due.delete(uid);
        const pod = known.get(uid);
        if (pod !== undefined && !rejected.has(uid)) deps.workers.updatePod({ pod, type: "sync" });
      }
    },

    async housekeeping() {
      if (!deps.podConfig.seenAllSources() || !deps.runtimeHealthy()) return;
      const desired = new Set(known.keys());
      const states = deps.workers.syncKnownPods(desired);
      // A pod desired again after its worker terminated (its UID came back) starts afresh.
      for (const [uid, pod] of known)
        if (!rejected.has(uid) && !states.has(uid)) deps.workers.updatePod({ pod, type: "create" });
      const running = await (deps.runtimePods ? deps.runtimePods() : deps.runtime.getPods());
      for (const rp of running) {
        if (desired.has(rp.uid) || deps.workers.couldHaveRunningContainers(rp.uid)) continue;
        log.info("removing a pod no source wants", {
          pod: `${rp.namespace}/${rp.name}`,
          uid: rp.uid,
        });
        try {
          await deps.runtime.killPod(undefined, rp);
          await deps.runtime.removePod(rp);
        } catch (error) {
          log.warn("could not remove an orphaned pod", { uid: rp.uid, error });
        }
      }
      const runningUids = new Set(running.map((p) => p.uid));
      const keep = (uid: string) =>
        desired.has(uid) || runningUids.has(uid) || deps.workers.couldHaveRunningContainers(uid);
      const failed = (what: string) => (name: string, error: unknown) =>
        log.warn(`cannot remove a removed pod's ${what}; trying again at the next housekeeping`, {
          folder: name,
          error,
        });
      await removeOrphanDirs(join(deps.rootDir, "pods"), (uid) => uid, keep, {
        onError: failed("folder"),
        ...(deps.removePodDir !== undefined && { remove: deps.removePodDir }),
      });
      if (deps.podLogsDir !== undefined) {
        await removeOrphanDirs(deps.podLogsDir, podUidOfLogDir, keep, {
          onError: failed("log folder"),
        });
      }
      for (const uid of deps.statusManager.uids()) {
        if (!desired.has(uid) && !deps.workers.couldHaveRunningContainers(uid)) {
          deps.statusManager.removePod(uid);
          deps.forgetCache(uid);
        }
      }
      await deps.resources
        ?.housekeeping(
          activePods(),
          (uid) => runningUids.has(uid) || deps.workers.couldHaveRunningContainers(uid),
        )
        .catch((error) => log.warn("cgroup housekeeping failed", { error }));
    },

    async run(signal) {
      // Each input's wait rejects when `signal` aborts, which ends its loop. Any other rejection
      // is a fault: next() logs it and pauses a second, so a broken input cannot spin the loop.
      const next = <T>(what: string, wait: Promise<T>): Promise<T | undefined> =>
        wait.catch(async (error) => {
          if (signal.aborted) return undefined;
          log.error(`reading the next ${what} failed; trying again in 1 s`, { error });
          await deps.clock.sleep(1000, signal).catch(() => undefined); // rejects on abort only
          return undefined;
        });
      const loops = [
        (async () => {
          while (!signal.aborted) {
            const update = await next("pod update", deps.podConfig.updates.next(signal));
            if (update !== undefined) this.handleConfigUpdate(update);
          }
        })(),
        (async () => {
          while (!signal.aborted) {
            const event = await next("PLEG event", deps.nextPLEGEvent(signal));
            if (event !== undefined) this.handlePLEGEvent(event);
          }
        })(),
        (async () => {
          while (!signal.aborted) {
            await next("sync tick", deps.clock.sleep(deps.syncTickMs ?? 1000, signal));
            if (!signal.aborted) this.syncTick();
          }
        })(),
        (async () => {
          while (!signal.aborted) {
            await next("housekeeping tick", deps.clock.sleep(deps.housekeepingIntervalMs, signal));
            if (signal.aborted) break;
            await this.housekeeping().catch((error) => log.error("housekeeping failed", { error }));
          }
        })(),
      ];
      await Promise.all(loops);
    },
  };
}
