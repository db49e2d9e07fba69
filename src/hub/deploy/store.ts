// Where the hub keeps what operators applied and what it decided: objects (DaemonSets, and the
// ConfigMaps and Secrets pods use), DaemonSet revisions, rollout records and per-device
// assignments. DeployStore is the interface, asynchronous as a database across the network is;
// SqliteDeployStore (store-sqlite.ts) is the embedded default, on the hub's database, and does
// its work before its promise is returned. Every write is stored when its promise resolves, and
// each call is one transaction. Secrets are stored sealed (sealing.ts).
import type { DaemonSetStatus, PodTemplateSpec } from "../../api/daemonset.ts";
import type { RolloutPhase, RolloutRecord } from "./plan.ts";

/** An applied object, as stored: apiVersion, kind, metadata (with uid, resourceVersion). */
export interface StoredObject {
  kind: string;
  namespace: string;
  name: string;
  object: { kind: string; metadata: { uid?: string; name: string } } & Record<string, unknown>;
}

export interface RevisionRecord {
  dsUid: string;
  hash: string;
  revision: number;
  template: PodTemplateSpec;
  changeCause?: string;
  createdAt: number;
}

interface AssignmentRecord {
  dsUid: string;
  node: string;
  hash: string;
  at: number;
}

export interface DeployState {
  resourceVersion: number;
  objects: StoredObject[];
  revisions: RevisionRecord[];
  rollouts: { dsUid: string; record: RolloutRecord }[];
  assignments: AssignmentRecord[];
  /** Each DaemonSet's status as last shown (hub replicas: by the leader). */
  statuses: ShownStatus[];
}

/** A DaemonSet's status as the leader shows it (shown.ts): its Kubernetes status, the rollout's
 * phase and since when (hub time), and the rollout's record it was made with. */
export interface ShownStatus {
  dsUid: string;
  status: DaemonSetStatus;
  phase: RolloutPhase;
  since: number;
  record: RolloutRecord;
}

/** An assignment's change: `hash` null when the device's assignment is removed. */
export type AssignmentChange = { dsUid: string; node: string; hash: string | null; at: number };

/** An object as another replica stored it, read from the change log (hub replicas): `object`
 * null when it was deleted; `revision`: a DaemonSet's revision stored with it. */
export interface StoredChange {
  kind: string;
  namespace: string;
  name: string;
  object: unknown;
  revision?: RevisionRecord;
  rv: number;
}

/** What one pass of the deployer decided on its own. */
export interface PassWrites {
  rollouts: { dsUid: string; record: RolloutRecord }[];
  assignments: AssignmentChange[];
  /** Revisions pruned (beyond the DaemonSet's revisionHistoryLimit). */
  pruned: { dsUid: string; hash: string }[];
  /** Statuses that changed (a hub started again, or a replica that does not lead, serves them
   * until a pass of its own shows them). */
  statuses: ShownStatus[];
}

export interface DeployStore {
  load(): Promise<DeployState>;
  /** Saves an object (create or replace) with the resourceVersion counter and, for a DaemonSet
   * whose current revision is new or renumbered, that revision. Gives the resourceVersion it
   * was stored with: `resourceVersion`, or on PostgreSQL serving replicas the next number of
   * the shared sequence when that is higher (pg/changes.ts; the object's
   * metadata.resourceVersion, when it was `resourceVersion`, is then stored as that number). */
  putObject(o: StoredObject, resourceVersion: number, revision?: RevisionRecord): Promise<number>;
  /** Deletes an object with the resourceVersion counter; `daemonSetUid`: a DaemonSet's, whose
   * revisions, rollout record and assignments go with it. Gives the resourceVersion stored, as
   * putObject. */
  deleteObject(
    key: { kind: string; namespace: string; name: string },
    resourceVersion: number,
    daemonSetUid?: string,
  ): Promise<number>;
  /** Writes what a pass decided (rollout records, assignments, pruned revisions, statuses). */
  writePass(p: PassWrites): Promise<void>;
}
