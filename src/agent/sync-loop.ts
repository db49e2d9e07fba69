// The sync loop (kubelet's syncLoop): turns config updates, PLEG events, the periodic resync and
// housekeeping into pod worker updates. Each input has an iteration method that tests call
// directly; run() drives them until aborted and never throws.
//
// Invariants:
// - Nothing is dispatched while the runtime is unhealthy; the loop backs off and reports why.
// - Orphans (runtime pods no source wants) are removed only after every source was seen once,
//   so a restarted agent never stops pods before it has read the manifest folder.
import { readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Pod } from "../api/types.ts";
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import type { PodUpdate as ConfigUpdate, PodConfig } from "./config/index.ts";
import type { EventRecorder } from "./events/index.ts";
import { podRef } from "./events/index.ts";
import type { PodLifecycleEvent } from "./pleg/index.ts";
import type { PodRuntime, PodSync } from "./pod-sync.ts";
import type { PodWorkers } from "./podworkers/index.ts";
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
  maxPods: number;
  /** Is the container runtime usable now (CRI Status answered and ready, PLEG relisting)? */
  runtimeHealthy(): boolean;
  nextPLEGEvent(signal: AbortSignal): Promise<PodLifecycleEvent>;
  /** Forgets a pod's cached runtime status. */
  forgetCache(uid: string): void;
  syncTickMs?: number;
  housekeepingIntervalMs: number;
}

export interface SyncLoop {
  handleConfigUpdate(update: ConfigUpdate): void;
  handlePLEGEvent(event: PodLifecycleEvent): void;
  /** Dispatches a sync for every pod whose requeue time has come. */
  syncTick(): void;
  /** Cleans up orphaned runtime pods, pod directories and statuses. */
  housekeeping(): Promise<void>;
  /** Marks a pod to sync again after `delayMs`. */
  requeue(uid: string, delayMs: number): void;
  /** Pods admitted and known, by UID. */
  pods(): Map<string, Pod>;
  run(signal: AbortSignal): Promise<void>;
}

const uidOf = (pod: Pod) => pod.metadata.uid as string;

export function createSyncLoop(deps: SyncLoopDeps): SyncLoop {
  const log = deps.logger;
  const known = new Map<string, Pod>();
  const rejected = new Set<string>();
  const due = new Map<string, number>();

  function admit(pod: Pod): boolean {
    const active = [...known.keys()].filter(
      (uid) => !rejected.has(uid) && deps.workers.state(uid) !== "terminated",
    ).length;
    if (active < deps.maxPods) return true;
    const message = `Node didn't have enough resource: pods, requested: 1, used: ${active}, capacity: ${deps.maxPods}`;
    deps.podSync.reject(pod, "OutOfpods", message);
    deps.recorder.event(podRef(pod), "Warning", "OutOfpods", message);
    log.warn("pod rejected at admission", { pod: pod.metadata.name, reason: "OutOfpods" });
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
      if (!admit(pod)) {
        known.set(uid, pod);
        rejected.add(uid);
        continue;
      }
      known.set(uid, pod);
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
      deps.workers.updatePod({ pod, type: "kill" });
    }
  }

  return {
    pods: () => known,

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
      deps.workers.syncKnownPods(desired);
      const running = await deps.runtime.getPods();
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
      const podsDir = join(deps.rootDir, "pods");
      const dirs = await readdir(podsDir).catch(() => [] as string[]);
      for (const uid of dirs) {
        if (
          desired.has(uid) ||
          runningUids.has(uid) ||
          deps.workers.couldHaveRunningContainers(uid)
        )
          continue;
        await rm(join(podsDir, uid), { recursive: true, force: true }).catch(() => {});
      }
      for (const uid of deps.statusManager.uids()) {
        if (!desired.has(uid) && !deps.workers.couldHaveRunningContainers(uid)) {
          deps.statusManager.removePod(uid);
          deps.forgetCache(uid);
        }
      }
    },

    async run(signal) {
      const loops = [
        (async () => {
          while (!signal.aborted) {
            const update = await deps.podConfig.updates.next(signal).catch(() => undefined);
            if (update !== undefined) this.handleConfigUpdate(update);
          }
        })(),
        (async () => {
          while (!signal.aborted) {
            const event = await deps.nextPLEGEvent(signal).catch(() => undefined);
            if (event !== undefined) this.handlePLEGEvent(event);
          }
        })(),
        (async () => {
          while (!signal.aborted) {
            await deps.clock.sleep(deps.syncTickMs ?? 1000, signal).catch(() => {});
            if (!signal.aborted) this.syncTick();
          }
        })(),
        (async () => {
          while (!signal.aborted) {
            await deps.clock.sleep(deps.housekeepingIntervalMs, signal).catch(() => {});
            if (signal.aborted) break;
            await this.housekeeping().catch((error) => log.error("housekeeping failed", { error }));
          }
        })(),
      ];
      await Promise.all(loops);
    },
  };
}
