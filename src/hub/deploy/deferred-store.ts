// The deploy store as the deployer's loop uses it: what operators ask (objects, revisions, a
// DaemonSet's removal) is written at once and throws when it cannot be, so that the request
// fails with a clear Status; what the loop decides on its own (rollout records, per-device
// assignments) is kept when the write fails (the data disk full) and written by the next pass
// that can, so that the loop goes on from memory and loses nothing. Invariants: a kept write is
// replaced by a newer one of the same key (rollout: the DaemonSet; assignment: DaemonSet and
// device); removing a DaemonSet drops what was kept of it; failures are logged once a minute.
import type { Logger } from "../../util/log.ts";
import type { RolloutRecord } from "./plan.ts";
import type { DeployState, DeployStore, RevisionRecord, StoredObject } from "./store.ts";

type AssignmentChange = Parameters<DeployStore["putAssignments"]>[0][number];

const SAY_EVERY_MS = 60_000;

export class DeferredDeployWrites implements DeployStore {
  /** Rollout records not written yet, by DaemonSet uid. */
  private readonly rollouts = new Map<string, RolloutRecord>();
  /** Assignment changes not written yet, by DaemonSet uid and device. */
  private readonly assignments = new Map<string, AssignmentChange>();
  /** When a failure was last logged. */
  private saidAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly inner: DeployStore,
    private readonly log: Logger,
    private readonly now: () => number,
  ) {}

  /** Writes kept from failed passes. */
  get waiting(): number {
    return this.rollouts.size + this.assignments.size;
  }

  load(): DeployState {
    return this.inner.load();
  }
  putObject(o: StoredObject, resourceVersion: number): void {
    this.inner.putObject(o, resourceVersion);
  }
  deleteObject(kind: string, namespace: string, name: string, resourceVersion: number): void {
    this.inner.deleteObject(kind, namespace, name, resourceVersion);
  }
  putRevision(r: RevisionRecord): void {
    this.inner.putRevision(r);
  }
  deleteRevision(dsUid: string, hash: string): void {
    this.inner.deleteRevision(dsUid, hash);
  }

  dropDaemonSet(dsUid: string): void {
    this.inner.dropDaemonSet(dsUid);
    this.rollouts.delete(dsUid);
    for (const [key, c] of this.assignments) if (c.dsUid === dsUid) this.assignments.delete(key);
  }

  putRollout(dsUid: string, record: RolloutRecord): void {
    this.rollouts.set(dsUid, record);
    this.writeWaiting();
  }

  /** Called by every pass (with no changes too): also writes what earlier passes could not. */
  putAssignments(changes: AssignmentChange[]): void {
    for (const c of changes) this.assignments.set(`${c.dsUid}\u0000${c.node}`, c);
    this.writeWaiting();
  }

  private writeWaiting(): void {
    if (this.waiting === 0) return;
    try {
      if (this.assignments.size > 0) {
        this.inner.putAssignments([...this.assignments.values()]);
        this.assignments.clear();
      }
      for (const [uid, record] of this.rollouts) {
        this.inner.putRollout(uid, record);
        this.rollouts.delete(uid);
      }
    } catch (err) {
      const now = this.now();
      if (now - this.saidAt < SAY_EVERY_MS) return;
      this.saidAt = now;
      this.log.error("cannot write rollout progress; kept in memory and written when possible", {
        error: err,
        waiting: this.waiting,
      });
    }
  }
}
