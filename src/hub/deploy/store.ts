// Where the hub keeps what operators applied and what it decided: objects (DaemonSets, and the
// ConfigMaps and Secrets pods use), DaemonSet revisions, rollout records and per-device
// assignments. DeployStore is the interface (a PostgreSQL store for several hub replicas would
// be a second implementation); SqliteDeployStore is the embedded default, on the hub's database.
// Every write is durable when the call returns.
import type { Database } from "bun:sqlite";
import type { PodTemplateSpec } from "../../api/daemonset.ts";
import type { RolloutRecord } from "./plan.ts";

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
}

export interface DeployStore {
  load(): DeployState;
  /** Saves an object (create or replace) with the resourceVersion counter, in one write. */
  putObject(o: StoredObject, resourceVersion: number): void;
  deleteObject(kind: string, namespace: string, name: string, resourceVersion: number): void;
  putRevision(r: RevisionRecord): void;
  deleteRevision(dsUid: string, hash: string): void;
  putRollout(dsUid: string, record: RolloutRecord): void;
  /** Applies assignment changes (`hash` null: removed) in one write. */
  putAssignments(changes: { dsUid: string; node: string; hash: string | null; at: number }[]): void;
  /** Drops the revisions, rollout and assignments of a deleted DaemonSet. */
  dropDaemonSet(dsUid: string): void;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS objects (kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
  body TEXT NOT NULL, PRIMARY KEY (kind, namespace, name));
CREATE TABLE IF NOT EXISTS revisions (ds_uid TEXT NOT NULL, hash TEXT NOT NULL, revision INTEGER NOT NULL,
  template TEXT NOT NULL, change_cause TEXT, created_at INTEGER NOT NULL, PRIMARY KEY (ds_uid, hash));
CREATE TABLE IF NOT EXISTS rollouts (ds_uid TEXT PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS assignments (ds_uid TEXT NOT NULL, node TEXT NOT NULL, hash TEXT NOT NULL,
  assigned_at INTEGER NOT NULL, PRIMARY KEY (ds_uid, node));
`;

export class SqliteDeployStore implements DeployStore {
  constructor(private readonly db: Database) {
    db.exec(SCHEMA);
  }

  load(): DeployState {
    const rv = this.db.query("SELECT value FROM meta WHERE key = 'resourceVersion'").get() as {
      value: string;
    } | null;
    const objects = this.db.query("SELECT kind, namespace, name, body FROM objects").all() as {
      kind: string;
      namespace: string;
      name: string;
      body: string;
    }[];
    const revisions = this.db.query("SELECT * FROM revisions").all() as {
      ds_uid: string;
      hash: string;
      revision: number;
      template: string;
      change_cause: string | null;
      created_at: number;
    }[];
    const rollouts = this.db.query("SELECT ds_uid, record FROM rollouts").all() as {
      ds_uid: string;
      record: string;
    }[];
    const assignments = this.db.query("SELECT * FROM assignments").all() as {
      ds_uid: string;
      node: string;
      hash: string;
      assigned_at: number;
    }[];
    return {
      resourceVersion: rv === null ? 0 : Number(rv.value),
      objects: objects.map((o) => ({ ...o, object: JSON.parse(o.body) })),
      revisions: revisions.map((r) => ({
        dsUid: r.ds_uid,
        hash: r.hash,
        revision: r.revision,
        template: JSON.parse(r.template) as PodTemplateSpec,
        ...(r.change_cause !== null && { changeCause: r.change_cause }),
        createdAt: r.created_at,
      })),
      rollouts: rollouts.map((r) => ({ dsUid: r.ds_uid, record: JSON.parse(r.record) })),
      assignments: assignments.map((a) => ({
        dsUid: a.ds_uid,
        node: a.node,
        hash: a.hash,
        at: a.assigned_at,
      })),
    };
  }

  private setResourceVersion(rv: number): void {
    this.db
      .query("INSERT OR REPLACE INTO meta (key, value) VALUES ('resourceVersion', ?)")
      .run(String(rv));
  }

  putObject(o: StoredObject, resourceVersion: number): void {
    this.db.transaction(() => {
      this.db
        .query("INSERT OR REPLACE INTO objects VALUES (?, ?, ?, ?)")
        .run(o.kind, o.namespace, o.name, JSON.stringify(o.object));
      this.setResourceVersion(resourceVersion);
    })();
  }

  deleteObject(kind: string, namespace: string, name: string, resourceVersion: number): void {
    this.db.transaction(() => {
      this.db
        .query("DELETE FROM objects WHERE kind = ? AND namespace = ? AND name = ?")
        .run(kind, namespace, name);
      this.setResourceVersion(resourceVersion);
    })();
  }

  putRevision(r: RevisionRecord): void {
    this.db
      .query("INSERT OR REPLACE INTO revisions VALUES (?, ?, ?, ?, ?, ?)")
      .run(
        r.dsUid,
        r.hash,
        r.revision,
        JSON.stringify(r.template),
        r.changeCause ?? null,
        r.createdAt,
      );
  }

  deleteRevision(dsUid: string, hash: string): void {
    this.db.query("DELETE FROM revisions WHERE ds_uid = ? AND hash = ?").run(dsUid, hash);
  }

  putRollout(dsUid: string, record: RolloutRecord): void {
    this.db
      .query("INSERT OR REPLACE INTO rollouts VALUES (?, ?)")
      .run(dsUid, JSON.stringify(record));
  }

  putAssignments(
    changes: { dsUid: string; node: string; hash: string | null; at: number }[],
  ): void {
    if (changes.length === 0) return;
    const put = this.db.query("INSERT OR REPLACE INTO assignments VALUES (?, ?, ?, ?)");
    const del = this.db.query("DELETE FROM assignments WHERE ds_uid = ? AND node = ?");
    this.db.transaction(() => {
      for (const c of changes) {
        if (c.hash === null) del.run(c.dsUid, c.node);
        else put.run(c.dsUid, c.node, c.hash, c.at);
      }
    })();
  }

  dropDaemonSet(dsUid: string): void {
    this.db.transaction(() => {
      for (const table of ["revisions", "rollouts", "assignments"])
        this.db.query(`DELETE FROM ${table} WHERE ds_uid = ?`).run(dsUid);
    })();
  }
}
