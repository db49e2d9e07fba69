// What the hub shows of each DaemonSet's rollout: its Kubernetes status and its rollout view
// (status.ts). The leader makes both in its passes and gives each status that changed to be
// stored (shared.ts); a replica that does not lead takes the statuses the leader stored and
// serves them as they are, and makes a view from its own observation of the devices with the
// leader's phase and record (docs/hub-replicas.md, "DaemonSet passes at every replica").
// Invariant: a status is kept with the phase, its start and the record it was made with, so a
// replica taking the lead goes on from the last leader's (a phase keeps its start).
import type { DaemonSetStatus } from "../../api/daemonset.ts";
import { jsonEqual } from "../../util/canonical.ts";
import type { Logger } from "../../util/log.ts";
import { rfc3339 } from "../views.ts";
import { daemonSetStatus, type RolloutView, rolloutView, type ViewInput } from "./status.ts";
import type { ShownStatus } from "./store.ts";

/** What a view is made of besides the rollout's phase and record. */
export type Observation = Omit<ViewInput, "phase" | "record">;

export class RolloutShown {
  /** By DaemonSet uid: the status made here (leading) or stored by the leader. */
  private readonly statuses = new Map<string, ShownStatus>();
  /** By DaemonSet uid: the views made by this replica's passes. */
  private readonly views = new Map<string, RolloutView>();

  constructor(private readonly log: Logger) {}

  /** Takes `statuses` (loaded) in place of everything held. */
  reset(statuses: readonly ShownStatus[]): void {
    this.statuses.clear();
    this.views.clear();
    for (const s of statuses) this.statuses.set(s.dsUid, s);
  }

  forget(uid: string): void {
    this.statuses.delete(uid);
    this.views.delete(uid);
  }

  /** A status the leader stored (the change log). */
  take(s: ShownStatus): void {
    this.statuses.set(s.dsUid, s);
  }

  status(uid: string): DaemonSetStatus | undefined {
    return this.statuses.get(uid)?.status;
  }

  /** The view of this replica's last pass. */
  view(uid: string): RolloutView | undefined {
    return this.views.get(uid);
  }

  /** A pass's view and status of one DaemonSet, kept; gives the status to store when it, or the
   * record, changed. */
  show(input: ViewInput, now: number): ShownStatus | undefined {
    const { ds, phase, record } = input;
    const uid = ds.metadata.uid ?? "";
    const view = rolloutView(input);
    const last = this.statuses.get(uid);
    const since = last !== undefined && last.phase === phase ? last.since : now;
    if (last?.phase !== phase)
      this.log.info("daemonset rollout", {
        daemonset: `${ds.metadata.namespace}/${ds.metadata.name}`,
        phase,
        message: view.message,
      });
    const status = daemonSetStatus(ds, input.devices, input.update, view, rfc3339(since));
    this.views.set(uid, view);
    if (last !== undefined && jsonEqual(last.status, status) && jsonEqual(last.record, record))
      return undefined;
    const shown = { dsUid: uid, status, phase, since, record };
    this.statuses.set(uid, shown);
    return shown;
  }

  /** At a replica that does not lead: the view of `o` with the phase and record the leader
   * stored; undefined before it stored any. */
  followed(o: Observation): RolloutView | undefined {
    const s = this.statuses.get(o.ds.metadata.uid ?? "");
    return s === undefined ? undefined : rolloutView({ ...o, phase: s.phase, record: s.record });
  }
}
