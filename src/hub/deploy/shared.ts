// What the leader's deploy passes decide, as hub replicas share it through the change log
// (docs/hub-replicas.md, "DaemonSet passes at every replica"), logged in the transaction that
// stores it, so that a replica that does not lead holds the same: each DaemonSet's status as
// shown (kind "dsstatus", key its uid; also kept in ds_statuses, so that a replica that starts
// later has it), each device's assignment (kind "dsassign", key "<uid>/<node>", the revision's
// hash; a tombstone when removed), each pruned revision (kind "dsprune", key "<uid>/<hash>", a
// tombstone). One encoding, used by the writer and the reader.
import type { ChangeRow } from "../pg/changes.ts";
import type { RolloutPhase } from "./plan.ts";
import type { AssignmentChange, ShownStatus } from "./store.ts";

export const STATUS_KIND = "dsstatus";
export const ASSIGN_KIND = "dsassign";
export const PRUNE_KIND = "dsprune";

/** The stored text of a shown status (its uid is its key). */
export const shownText = (s: ShownStatus): string =>
  JSON.stringify({ status: s.status, phase: s.phase, since: s.since, record: s.record });

const PHASES = new Set<string>(["Complete", "Canary", "Rolling", "Failed"]);

/** The shown status a row of `dsUid` gives. */
export function shownOf(dsUid: string, text: string): ShownStatus {
  const o = JSON.parse(text) as Partial<ShownStatus>;
  if (
    typeof o.status !== "object" ||
    o.status === null ||
    typeof o.phase !== "string" ||
    !PHASES.has(o.phase) ||
    typeof o.since !== "number" ||
    typeof o.record !== "object" ||
    o.record === null
  )
    throw new Error(`not a DaemonSet status: ${text.slice(0, 200)}`);
  return {
    dsUid,
    status: o.status,
    phase: o.phase as RolloutPhase,
    since: o.since,
    record: o.record,
  };
}

export const statusRow = (s: ShownStatus): ChangeRow => ({
  kind: STATUS_KIND,
  key: s.dsUid,
  deleted: false,
  object: shownText(s),
});

export const assignRow = (c: AssignmentChange): ChangeRow => ({
  kind: ASSIGN_KIND,
  key: `${c.dsUid}/${c.node}`,
  deleted: c.hash === null,
  object: c.hash,
});

export const pruneRow = (r: { dsUid: string; hash: string }): ChangeRow => ({
  kind: PRUNE_KIND,
  key: `${r.dsUid}/${r.hash}`,
  deleted: true,
  object: null,
});
