// Where the hub keeps what operators applied and what it decided: objects (DaemonSets, and the
// ConfigMaps and Secrets pods use), DaemonSet revisions, rollout records and per-device
// assignments. DeployStore is the interface (a PostgreSQL store for several hub replicas would
// be a second implementation); SqliteDeployStore is the embedded default, on the hub's database.
// Every write is durable when the call returns. Secrets are stored sealed (sealing.ts).
import type { Database } from "bun:sqlite";
import type { PodTemplateSpec } from "../../api/daemonset.ts";
import type { Logger } from "../../util/log.ts";
import type { RolloutRecord } from "./plan.ts";
import type { SecretSealer } from "./sealing.ts";

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

/** The name a sealed Secret's body is bound to. */
const binding = (namespace: string, name: string) => `${namespace}/${name}`;

export class SqliteDeployStore implements DeployStore {
  /** `sealer`: Secrets' bodies are sealed with it (sealing.ts); without one they are plain
   * (tests of other parts). */
  constructor(
    private readonly db: Database,
    private readonly sealer?: SecretSealer,
  ) {
    db.exec(SCHEMA);
  }

  /** An object's body as it is stored: a Secret's sealed when there is a sealer. */
  private bodyOf(o: Pick<StoredObject, "kind" | "namespace" | "name">, text: string): string {
    if (o.kind !== "Secret" || this.sealer === undefined) return text;
    return this.sealer.seal(text, binding(o.namespace, o.name));
  }

  /** An object's JSON from its stored body (a sealed one opened; throws SealError). */
  private textOf(o: { kind: string; namespace: string; name: string; body: string }): string {
    if (o.kind !== "Secret" || this.sealer === undefined) return o.body;
    return this.sealer.open(o.body, binding(o.namespace, o.name));
  }

  /**
   * Seals again every Secret stored plain (before sealing) or with another key than the
   * sealing one (a rotated key), in one transaction; how many. Throws SealError when one does
   * not open, before writing anything.
   */
  sealSecrets(): number {
    const sealer = this.sealer;
    if (sealer === undefined) return 0;
    const rows = this.db
      .query("SELECT kind, namespace, name, body FROM objects WHERE kind = 'Secret'")
      .all() as { kind: string; namespace: string; name: string; body: string }[];
    const stale = rows.filter((r) => sealer.keyIdOf(r.body) !== sealer.sealingKeyId);
    const sealed = stale.map((r) => ({ ...r, body: this.bodyOf(r, this.textOf(r)) }));
    const put = this.db.query(
      "UPDATE objects SET body = ? WHERE kind = ? AND namespace = ? AND name = ?",
    );
    if (sealed.length === 0) return 0;
    // What was plain is overwritten where it lay, not only unlinked, and the log is folded into
    // the file: no copy of it is left in a free page or in the write-ahead log.
    this.db.exec("PRAGMA secure_delete = ON");
    try {
      this.db.transaction(() => {
        for (const r of sealed) put.run(r.body, r.kind, r.namespace, r.name);
      })();
      this.db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    } finally {
      this.db.exec("PRAGMA secure_delete = OFF");
    }
    return sealed.length;
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
      objects: objects.map((o) => ({
        kind: o.kind,
        namespace: o.namespace,
        name: o.name,
        object: JSON.parse(this.textOf(o)),
      })),
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
        .run(o.kind, o.namespace, o.name, this.bodyOf(o, JSON.stringify(o.object)));
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

/**
 * The deploy store on the hub's database, its Secrets sealed with the sealing key first. A
 * Secret that does not open closes the hub's store and throws SealError: the hub does not start.
 */
export function openDeployStore(
  hub: { database: Database; close(): unknown },
  sealer: SecretSealer | undefined,
  log: Logger,
): SqliteDeployStore {
  const store = new SqliteDeployStore(hub.database, sealer);
  try {
    const resealed = store.sealSecrets();
    if (resealed > 0) log.info("sealed stored Secrets with the sealing key", { resealed });
  } catch (err) {
    hub.close();
    throw err;
  }
  return store;
}
