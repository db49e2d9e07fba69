// The pod workers themselves: a worker per UID, each running one step at a time (sync, or
// terminating then terminated), scheduled as updates arrive (see index.ts for the invariants).
import type { Pod } from "../../api/types.ts";
import { sleepQuietly } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import type { PodWorkers, PodWorkersDeps } from "./index.ts";
import { StartedNames } from "./names.ts";
import type { PodUpdate, WorkerState } from "./types.ts";
import { fullNameOf, mergeUpdate, newWorker, type Worker } from "./worker.ts";

type SyncResult = { terminal: boolean; retry?: boolean } | "cancelled";

export class PodWorkerSet implements PodWorkers {
  private readonly workers = new Map<string, Worker>();
  private readonly names = new StartedNames(this.workers);
  /** Resolvers of idle() calls, run once no worker is running or has pending work. */
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly deps: PodWorkersDeps) {}

  updatePod(update: PodUpdate): void {
    const uid = update.pod.metadata.uid;
    if (uid === undefined) throw new Error(`pod ${fullNameOf(update.pod)} has no uid`);
    let w = this.workers.get(uid);
    if (w === undefined) {
      // A kill for a pod never started: a terminated worker, so callers see it done.
      w = newWorker(update.pod, update.type === "kill" ? "terminated" : "syncing");
      this.workers.set(uid, w);
      if (w.state === "terminated") return;
    }
    if (mergeUpdate(w, update)) this.schedule(w);
  }

  state(uid: string): WorkerState | undefined {
    return this.workers.get(uid)?.state;
  }

  isTerminationRequested(uid: string): boolean {
    return this.workers.get(uid)?.kill !== undefined;
  }

  isEvicted(uid: string): boolean {
    return this.workers.get(uid)?.evicted === true;
  }

  couldHaveRunningContainers(uid: string): boolean {
    const w = this.workers.get(uid);
    return w !== undefined && w.state !== "terminated";
  }

  activePods(): Pod[] {
    return [...this.workers.values()]
      .filter((w) => w.state === "syncing" && !w.blocked)
      .map((w) => w.pod);
  }

  syncKnownPods(desired: Set<string>): Map<string, WorkerState> {
    for (const [uid, w] of this.workers) {
      const unwanted = !desired.has(uid) || w.restartRequested;
      if (unwanted && w.state === "terminated" && !w.running) this.drop(uid, w);
    }
    return new Map([...this.workers].map(([uid, w]) => [uid, w.state]));
  }

  forgetTerminated(uid: string): boolean {
    const w = this.workers.get(uid);
    if (w === undefined || w.state !== "terminated" || w.running) return false;
    this.drop(uid, w);
    return true;
  }

  idle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  private isIdle(): boolean {
    return [...this.workers.values()].every((w) => !w.running && w.pending === undefined);
  }

  private notifyIdle(): void {
    if (!this.isIdle()) return;
    const ready = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of ready) resolve();
  }

  private drop(uid: string, w: Worker): void {
    this.workers.delete(uid);
    this.names.forget(w.fullName, uid);
  }

  private schedule(w: Worker): void {
    if (w.running || w.blocked || w.pending === undefined || this.deps.signal?.aborted) return;
    w.running = true;
    void this.runWorker(w).finally(() => {
      w.running = false;
      if (w.pending !== undefined && !w.blocked) this.schedule(w);
      else this.notifyIdle();
    });
  }

  /** One step of a worker: its sync, or its termination; a failed step is retried. */
  private async runWorker(w: Worker): Promise<void> {
    const update = w.pending as PodUpdate;
    w.pending = undefined;
    w.pod = update.pod;
    const log = this.deps.logger.with({ pod: w.fullName, uid: w.uid });
    try {
      if (w.state === "syncing" && w.kill === undefined) {
        if (!this.names.mayStart(w)) {
          w.blocked = true;
          w.pending = update;
          log.info("waiting for the previous version of the pod to finish terminating");
          return;
        }
        const result = await this.sync(w, update);
        if (result === "cancelled") return;
        if (!result.terminal) {
          const { errorBackoffMs, resyncIntervalMs } = this.deps;
          this.deps.requeue(w.uid, result.retry ? errorBackoffMs : resyncIntervalMs);
          return;
        }
        w.kill = {};
      }
      if (w.state === "syncing") w.state = "terminating";
      if (w.state === "terminating") await this.terminate(w, log);
    } catch (err) {
      log.error("pod sync failed; retrying", { error: err });
      await this.retryLater(w);
    }
  }

  /** The sync step; "cancelled" when a kill aborted it (the kill is pending and runs next). */
  private async sync(w: Worker, update: PodUpdate): Promise<SyncResult> {
    const cancel = new AbortController();
    w.cancel = cancel;
    try {
      const result = await this.deps.syncPod(w.pod, update.type, cancel.signal);
      return cancel.signal.aborted ? "cancelled" : result;
    } catch (err) {
      if (cancel.signal.aborted) return "cancelled";
      throw err;
    } finally {
      w.cancel = undefined;
    }
  }

  /** The terminating and terminated steps; the worker ends terminated. */
  private async terminate(w: Worker, log: Logger): Promise<void> {
    const kill = w.kill ?? {};
    const grace = w.gracePeriodSeconds ?? w.pod.spec.terminationGracePeriodSeconds ?? 30;
    await this.deps.syncTerminatingPod(w.pod, grace, kill);
    await this.deps.syncTerminatedPod(w.pod, kill);
    w.state = "terminated";
    log.info(w.evicted ? "pod evicted and cleaned up" : "pod terminated");
    const next = this.names.release(w.fullName);
    if (next !== undefined) this.schedule(next);
  }

  /** After a step threw: a kill is retried after the back-off; a sync is requeued for after
   * the back-off (updates that came meanwhile are dropped: the requeued sync takes the newest
   * pod). */
  private async retryLater(w: Worker): Promise<void> {
    if (w.state === "terminated") return;
    if (w.kill === undefined) {
      w.pending = undefined;
      this.deps.requeue(w.uid, this.deps.errorBackoffMs);
      return;
    }
    if (w.pending === undefined) w.pending = { pod: w.pod, type: "kill", kill: w.kill };
    await sleepQuietly(this.deps.clock, this.deps.errorBackoffMs, this.deps.signal);
  }
}
