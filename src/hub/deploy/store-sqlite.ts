// The deploy store (store.ts) in the hub's SQLite database. Secrets' bodies are sealed with the
// sealer given (sealing.ts).
import type { Database } from "bun:sqlite";
import type { PodTemplateSpec } from "../../api/daemonset.ts";
import type { Logger } from "../../util/log.ts";
import type { SecretSealer } from "./sealing.ts";
import { shownOf, shownText } from "./shared.ts";
import type {
  DeployState,
  DeployStore,
  PassWrites,
  RevisionRecord,
  StoredObject,
} from "./store.ts";

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS objects (kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
  body TEXT NOT NULL, PRIMARY KEY (kind, namespace, name));
CREATE TABLE IF NOT EXISTS revisions (ds_uid TEXT NOT NULL, hash TEXT NOT NULL, revision INTEGER NOT NULL,
  template TEXT NOT NULL, change_cause TEXT, created_at INTEGER NOT NULL, PRIMARY KEY (ds_uid, hash));
CREATE TABLE IF NOT EXISTS rollouts (ds_uid TEXT PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS assignments (ds_uid TEXT NOT NULL, node TEXT NOT NULL, hash TEXT NOT NULL,
  assigned_at INTEGER NOT NULL, PRIMARY KEY (ds_uid, node));
CREATE TABLE IF NOT EXISTS ds_statuses (ds_uid TEXT PRIMARY KEY, body TEXT NOT NULL);
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

  async load(): Promise<DeployState> {
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
    const statuses = this.db.query("SELECT ds_uid, body FROM ds_statuses").all() as {
      ds_uid: string;
      body: string;
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
      statuses: statuses.map((r) => shownOf(r.ds_uid, r.body)),
    };
  }

  private setResourceVersion(rv: number): void {
    this.db
      .query("INSERT OR REPLACE INTO meta (key, value) VALUES ('resourceVersion', ?)")
      .run(String(rv));
  }

  async putObject(o: StoredObject, resourceVersion: number, revision?: RevisionRecord) {
    this.db.transaction(() => {
      this.db
        .query("INSERT OR REPLACE INTO objects VALUES (?, ?, ?, ?)")
        .run(o.kind, o.namespace, o.name, this.bodyOf(o, JSON.stringify(o.object)));
      this.setResourceVersion(resourceVersion);
      if (revision !== undefined) this.putRevision(revision);
    })();
    return resourceVersion;
  }

  async deleteObject(
    key: { kind: string; namespace: string; name: string },
    resourceVersion: number,
    daemonSetUid?: string,
  ): Promise<number> {
    this.db.transaction(() => {
      this.db
        .query("DELETE FROM objects WHERE kind = ? AND namespace = ? AND name = ?")
        .run(key.kind, key.namespace, key.name);
      this.setResourceVersion(resourceVersion);
      if (daemonSetUid !== undefined)
        for (const table of ["revisions", "rollouts", "assignments", "ds_statuses"])
          this.db.query(`DELETE FROM ${table} WHERE ds_uid = ?`).run(daemonSetUid);
    })();
    return resourceVersion;
  }

  private putRevision(r: RevisionRecord): void {
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

  async writePass({ rollouts, assignments, pruned, statuses }: PassWrites): Promise<void> {
    if (rollouts.length + assignments.length + pruned.length + statuses.length === 0) return;
    const putStatus = this.db.query("INSERT OR REPLACE INTO ds_statuses VALUES (?, ?)");
    const putRollout = this.db.query("INSERT OR REPLACE INTO rollouts VALUES (?, ?)");
    const put = this.db.query("INSERT OR REPLACE INTO assignments VALUES (?, ?, ?, ?)");
    const del = this.db.query("DELETE FROM assignments WHERE ds_uid = ? AND node = ?");
    const prune = this.db.query("DELETE FROM revisions WHERE ds_uid = ? AND hash = ?");
    this.db.transaction(() => {
      for (const r of rollouts) putRollout.run(r.dsUid, JSON.stringify(r.record));
      for (const c of assignments) {
        if (c.hash === null) del.run(c.dsUid, c.node);
        else put.run(c.dsUid, c.node, c.hash, c.at);
      }
      for (const r of pruned) prune.run(r.dsUid, r.hash);
      for (const st of statuses) putStatus.run(st.dsUid, shownText(st));
    })();
  }
}

/**
 * The deploy store on the hub's database `db`, its Secrets sealed with the sealing key first.
 * Throws SealError when a Secret does not open: the hub does not start.
 */
export function openDeployStore(
  db: Database,
  sealer: SecretSealer | undefined,
  log: Logger,
): SqliteDeployStore {
  const store = new SqliteDeployStore(db, sealer);
  const resealed = store.sealSecrets();
  if (resealed > 0) log.info("sealed stored Secrets with the sealing key", { resealed });
  return store;
}
