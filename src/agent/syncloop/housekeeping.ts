// Housekeeping (the kubelet's HandlePodCleanups), every housekeeping interval once every source
// was seen: forget terminated workers of pods no source wants (and start afresh those desired
// again), stop and remove runtime pods no source wants that may still run (dead ones are the
// container GC's), remove their folders, log folders and statuses, and tidy the cgroups.
import { join } from "node:path";
import type { Pod } from "../../api/types.ts";
import type { Logger } from "../../util/log.ts";
import type { RunningPod } from "../kubecontainer/types.ts";
import type { PodUpdate } from "../podworkers/index.ts";
import { podUidOfLogDir, removeOrphanDirs } from "./orphan-dirs.ts";
import type { PodRecord } from "./pods.ts";

export interface HousekeepingDeps {
  logger: Logger;
  rootDir: string;
  /** Pod log folders of pods gone are removed from here; absent: none are. */
  podLogsDir?: string;
  /** Whether every pod source was seen once (until then nothing is an orphan). */
  seenAllSources(): boolean;
  runtimeHealthy(): boolean;
  /** The runtime's pods; may be a listing a moment old. */
  runtimePods(): Promise<RunningPod[]>;
  /** Stops and removes a runtime pod no source wants. */
  removeOrphan(running: RunningPod): Promise<void>;
  /** Removes an orphaned pod folder, unmounting its volumes first (the volume manager);
   * absent: the folder is removed as it is. */
  removePodDir?: (uid: string) => Promise<unknown>;
  couldHaveRunningContainers(uid: string): boolean;
  /** Drops terminated workers of pods not in `desired` (and those asked to restart); returns
   * the states of the workers kept. */
  syncKnownPods(desired: Set<string>): ReadonlyMap<string, unknown>;
  /** Starts a pod's worker (a desired pod whose worker was dropped to restart it). */
  updatePod(update: PodUpdate): void;
  statusUids(): string[];
  removeStatus(uid: string): void;
  /** Forgets a pod's cached runtime status. */
  forgetCache(uid: string): void;
  /** Updates QoS cgroups and removes those of pods neither active nor `keep`; absent: none. */
  cgroupHousekeeping?(active: readonly Pod[], keep: (uid: string) => boolean): Promise<void>;
  activePods(): Pod[];
}

/** Whether anything of a runtime pod may run: a ready sandbox, or a container running or in an
 * unknown state. */
function mayRun(rp: RunningPod): boolean {
  return (
    rp.sandboxes.some((s) => s.state === "ready") ||
    rp.containers.some((c) => c.state === "running" || c.state === "unknown")
  );
}

/** Stops and removes the runtime pods no source wants that may still run; returns the runtime
 * pods that may run. What is left of dead pods (exited containers, stopped sandboxes) is the
 * container GC's, as in the kubelet: a sandbox the runtime cannot stop is retried there with a
 * back-off rather than here at every housekeeping. */
async function removeOrphans(
  deps: HousekeepingDeps,
  wanted: (uid: string) => boolean,
): Promise<RunningPod[]> {
  const running = (await deps.runtimePods()).filter(mayRun);
  for (const rp of running) {
    if (wanted(rp.uid) || deps.couldHaveRunningContainers(rp.uid)) continue;
    deps.logger.info("removing a pod no source wants", {
      pod: `${rp.namespace}/${rp.name}`,
      uid: rp.uid,
    });
    await deps
      .removeOrphan(rp)
      .catch((error) =>
        deps.logger.warn("could not remove an orphaned pod", { uid: rp.uid, error }),
      );
  }
  return running;
}

/** Removes the pod folders and pod log folders of pods that are gone. */
async function removeFolders(
  deps: HousekeepingDeps,
  keep: (uid: string) => boolean,
): Promise<void> {
  const failed = (what: string) => (name: string, error: unknown) =>
    deps.logger.warn(
      `cannot remove a removed pod's ${what}; trying again at the next housekeeping`,
      { folder: name, error },
    );
  await removeOrphanDirs(join(deps.rootDir, "pods"), (uid) => uid, keep, {
    onError: failed("folder"),
    ...(deps.removePodDir !== undefined && { remove: deps.removePodDir }),
  });
  if (deps.podLogsDir !== undefined) {
    await removeOrphanDirs(deps.podLogsDir, podUidOfLogDir, keep, {
      onError: failed("log folder"),
    });
  }
}

export async function housekeeping(deps: HousekeepingDeps, record: PodRecord): Promise<void> {
  if (!deps.seenAllSources() || !deps.runtimeHealthy()) return;
  const states = deps.syncKnownPods(new Set(record.pods.pods().keys()));
  // A pod desired again after its worker terminated (its UID came back) starts afresh.
  for (const [uid, pod] of record.pods.pods())
    if (!record.rejected.has(uid) && !states.has(uid)) deps.updatePod({ pod, type: "create" });
  // Housekeeping runs beside the loop, which may admit (or reject) pods while it waits on the
  // runtime or the disk: whether a source wants a pod is asked at each step, never from a list
  // taken at the start, so a pod added meanwhile keeps its status and its folder.
  const wanted = (uid: string) => record.pods.has(uid);
  const running = await removeOrphans(deps, wanted);
  const runningUids = new Set(running.map((p) => p.uid));
  const stopping = (uid: string) => deps.couldHaveRunningContainers(uid);
  await removeFolders(deps, (uid) => wanted(uid) || runningUids.has(uid) || stopping(uid));
  for (const uid of deps.statusUids()) {
    if (!wanted(uid) && !stopping(uid)) {
      deps.removeStatus(uid);
      deps.forgetCache(uid);
    }
  }
  await deps
    .cgroupHousekeeping?.(deps.activePods(), (uid) => runningUids.has(uid) || stopping(uid))
    .catch((error) => deps.logger.warn("cgroup housekeeping failed", { error }));
}
