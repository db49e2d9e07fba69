// The deploy store as the deployer's loop uses it: what operators ask (objects, revisions, a
// DaemonSet's removal) is written at once and rejects when it cannot be, so that the request
// fails with a clear Status; what the loop decides on its own (rollout records, per-device
// assignments, pruned revisions) is kept when the write fails (the data disk full) and written
// by the next pass that can, so that the loop goes on from memory and loses nothing.
// Invariants: a kept write is replaced by a newer one of the same key (rollout and status: the
// DaemonSet; assignment: DaemonSet and device; pruned revision: DaemonSet and hash); removing a
// DaemonSet drops what was kept of it, and storing a revision drops a kept prune of it; failures
// are logged once a minute. The caller does not run two calls at once (the deployer's passes and
// operator actions run one at a time).
import type { Logger } from "../../util/log.ts";
import { NotLeaderError } from "../leader.ts";
import type { RolloutRecord } from "./plan.ts";
import type {
  AssignmentChange,
  DeployState,
  DeployStore,
  PassWrites,
  RevisionRecord,
  ShownStatus,
  StoredObject,
} from "./store.ts";

const SAY_EVERY_MS = 60_000;

const pairKey = (a: string, b: string) => `${a}\u0000${b}`;

export class DeferredDeployWrites implements DeployStore {
  /** Rollout records not written yet, by DaemonSet uid. */
  private readonly rollouts = new Map<string, RolloutRecord>();
  /** Assignment changes not written yet, by DaemonSet uid and device. */
  private readonly assignments = new Map<string, AssignmentChange>();
  /** Pruned revisions not deleted yet, by DaemonSet uid and hash. */
  private readonly pruned = new Map<string, { dsUid: string; hash: string }>();
  /** Statuses not written yet, by DaemonSet uid. */
  private readonly statuses = new Map<string, ShownStatus>();
  /** When a failure was last logged. */
  private saidAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly inner: DeployStore,
    private readonly log: Logger,
    private readonly now: () => number,
  ) {}

  /** Writes kept from failed passes. */
  get waiting(): number {
    return this.rollouts.size + this.assignments.size + this.pruned.size + this.statuses.size;
  }

  /** The store's state; what was kept is dropped (a replica taking the lead starts from what
   * the last leader stored). */
  load(): Promise<DeployState> {
    this.forget();
    return this.inner.load();
  }

  private forget(): void {
    this.rollouts.clear();
    this.assignments.clear();
    this.pruned.clear();
    this.statuses.clear();
  }

  async putObject(o: StoredObject, resourceVersion: number, revision?: RevisionRecord) {
    const stored = await this.inner.putObject(o, resourceVersion, revision);
    if (revision !== undefined) this.pruned.delete(pairKey(revision.dsUid, revision.hash));
    return stored;
  }

  async deleteObject(
    key: { kind: string; namespace: string; name: string },
    resourceVersion: number,
    daemonSetUid?: string,
  ): Promise<number> {
    const stored = await this.inner.deleteObject(key, resourceVersion, daemonSetUid);
    if (daemonSetUid === undefined) return stored;
    this.rollouts.delete(daemonSetUid);
    this.statuses.delete(daemonSetUid);
    for (const m of [this.assignments, this.pruned])
      for (const [k, c] of m) if (c.dsUid === daemonSetUid) m.delete(k);
    return stored;
  }

  /** Called by every pass (with nothing new too): also writes what earlier passes could not.
   * Rejects only with NotLeaderError (this replica no longer leads: what was kept is dropped);
   * otherwise what is not written is kept. */
  async writePass(p: PassWrites): Promise<void> {
    for (const r of p.rollouts) this.rollouts.set(r.dsUid, r.record);
    for (const c of p.assignments) this.assignments.set(pairKey(c.dsUid, c.node), c);
    for (const r of p.pruned) this.pruned.set(pairKey(r.dsUid, r.hash), r);
    for (const s of p.statuses) this.statuses.set(s.dsUid, s);
    if (this.waiting === 0) return;
    const batch: PassWrites = {
      rollouts: [...this.rollouts].map(([dsUid, record]) => ({ dsUid, record })),
      assignments: [...this.assignments.values()],
      pruned: [...this.pruned.values()],
      statuses: [...this.statuses.values()],
    };
    try {
      await this.inner.writePass(batch);
    } catch (err) {
      if (err instanceof NotLeaderError) {
        this.forget();
        throw err;
      }
      this.failed(err);
      return;
    }
    // Only what was written goes: a newer write of one key, kept meanwhile, stays.
    for (const r of batch.rollouts)
      if (this.rollouts.get(r.dsUid) === r.record) this.rollouts.delete(r.dsUid);
    for (const c of batch.assignments) {
      const k = pairKey(c.dsUid, c.node);
      if (this.assignments.get(k) === c) this.assignments.delete(k);
    }
    for (const r of batch.pruned) this.pruned.delete(pairKey(r.dsUid, r.hash));
    for (const s of batch.statuses)
      if (this.statuses.get(s.dsUid) === s) this.statuses.delete(s.dsUid);
  }

  private failed(err: unknown): void {
    const now = this.now();
    if (now - this.saidAt < SAY_EVERY_MS) return;
    this.saidAt = now;
    this.log.error("cannot write rollout progress; kept in memory and written when possible", {
      error: err,
      waiting: this.waiting,
    });
  }
}
