// The deploy store (store.ts) in the hub's PostgreSQL database (migration 2's objects,
// revisions, rollouts and assignments; the resourceVersion counter in `meta`). Each call is one
// transaction of upserts and deletes, so it may be run again after its session ended. Secrets'
// bodies are sealed with the sealer given (sealing.ts) before they are sent to the server.
// An object's write or deletion is numbered from the change log's sequence (pg/changes.ts) and
// appended to the log in its transaction, as `{"body": <the stored body>, "revision": …}` (a
// Secret's body sealed, never in the clear); a copy from SQLite (`copy`) keeps the numbers it is
// given and appends nothing.
import type { SQL } from "bun";
import type { PodTemplateSpec } from "../../api/daemonset.ts";
import type { Logger } from "../../util/log.ts";
import { appendAt, appendChanges, ChangeFeed, type ChangeRow, drawRv } from "../pg/changes.ts";
import { type Columns, deleteRows, lastByKey, upsertRows } from "../pg/rows.ts";
import { type PgPool, transaction } from "../pg/transaction.ts";
import type { RolloutRecord } from "./plan.ts";
import type { SecretSealer } from "./sealing.ts";
import { assignRow, pruneRow, shownOf, shownText, statusRow } from "./shared.ts";
import type {
  DeployState,
  DeployStore,
  PassWrites,
  RevisionRecord,
  StoredObject,
} from "./store.ts";

const ROLLOUTS: Columns = {
  table: "rollouts",
  key: ["ds_uid"],
  types: { ds_uid: "text", record: "json" },
};
const ASSIGNMENTS: Columns = {
  table: "assignments",
  key: ["ds_uid", "node"],
  types: { ds_uid: "text", node: "text", hash: "text", assigned_at: "bigint" },
};
const STATUSES: Columns = {
  table: "ds_statuses",
  key: ["ds_uid"],
  types: { ds_uid: "text", body: "json" },
};
const REVISIONS: Columns = {
  table: "revisions",
  key: ["ds_uid", "hash"],
  types: {
    ...{ ds_uid: "text", hash: "text", revision: "integer", template: "json" },
    ...{ change_cause: "json", created_at: "bigint" },
  },
};

interface ObjectRow {
  kind: string;
  namespace: string;
  name: string;
  body: string;
}

interface RevisionRow {
  ds_uid: string;
  hash: string;
  revision: number;
  template: PodTemplateSpec;
  change_cause: string | null;
  created_at: string;
}

/** A revision's change cause as stored: a json string (it may hold NUL), or null. */
const changeCause = (r: RevisionRecord): string | null =>
  r.changeCause === undefined ? null : JSON.stringify(r.changeCause);

/** The name a sealed Secret's body is bound to. */
const binding = (namespace: string, name: string) => `${namespace}/${name}`;

const revisionFromRow = (r: RevisionRow): RevisionRecord => ({
  dsUid: r.ds_uid,
  hash: r.hash,
  revision: r.revision,
  template: r.template,
  ...(r.change_cause !== null && { changeCause: r.change_cause }),
  createdAt: Number(r.created_at),
});

async function setResourceVersion(tx: SQL, rv: number): Promise<void> {
  await tx.unsafe(
    `INSERT INTO meta (key, value) VALUES ('resourceVersion', $1)
     ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
    [String(rv)],
  );
}

/** How the store numbers its writes: the feed of the change log, or a copy's given numbers. */
export interface DeployNumbering {
  feed: ChangeFeed;
  /** A copy from SQLite (migrate.ts): numbers as given, nothing appended to the log. */
  copy: boolean;
}

/** `object` with its metadata.resourceVersion `rv`, when it was `given` (stamped by the hub). */
function restamp(object: StoredObject["object"], given: number, rv: number) {
  const meta = object.metadata as { resourceVersion?: string };
  if (rv === given || meta.resourceVersion !== String(given)) return object;
  return { ...object, metadata: { ...object.metadata, resourceVersion: String(rv) } };
}

export class PostgresDeployStore implements DeployStore {
  /** `sealer`: Secrets' bodies are sealed with it (sealing.ts); without one they are plain
   * (tests of other parts). */
  constructor(
    private readonly pool: PgPool,
    private readonly sealer?: SecretSealer,
    private readonly numbering: DeployNumbering = { feed: new ChangeFeed(), copy: false },
  ) {}

  /** The number of a write given `given`: the sequence's next when higher (a copy: `given`,
   * the sequence moved past it). */
  private async numbered(tx: SQL, given: number): Promise<number> {
    if (!this.numbering.copy) return drawRv(tx, given);
    await tx.unsafe(
      "SELECT setval('changes_rv', $1) FROM changes_rv WHERE $1::bigint >= last_value",
      [given],
    );
    return given;
  }

  /** Appends the change of object `o` numbered `rv` (not in a copy). */
  private async logged(
    tx: SQL,
    rv: number,
    o: Pick<StoredObject, "kind" | "namespace" | "name">,
    stored?: { body: string; revision?: RevisionRecord },
  ): Promise<void> {
    if (this.numbering.copy) return;
    const row = {
      kind: o.kind,
      key: `${o.namespace}/${o.name}`,
      deleted: stored === undefined,
      object: stored === undefined ? null : JSON.stringify(stored),
    };
    await appendAt(tx, rv, row, this.numbering.feed.origin, this.numbering.feed.now());
  }

  /** Tells the feed of a committed write (not in a copy); gives `rv`. */
  private committed(rv: number): number {
    if (!this.numbering.copy) this.numbering.feed.committed(rv);
    return rv;
  }

  /** An object's body as it is stored: a Secret's sealed when there is a sealer. */
  private bodyOf(o: Pick<StoredObject, "kind" | "namespace" | "name">, text: string): string {
    if (o.kind !== "Secret" || this.sealer === undefined) return text;
    return this.sealer.seal(text, binding(o.namespace, o.name));
  }

  /** An object's JSON from its stored body (a sealed one opened; throws SealError). */
  textOf(o: ObjectRow): string {
    if (o.kind !== "Secret" || this.sealer === undefined) return o.body;
    return this.sealer.open(o.body, binding(o.namespace, o.name));
  }

  /**
   * Seals again every Secret stored plain or with another key than the sealing one (a rotated
   * key), in one transaction; how many. Throws SealError when one does not open, before writing
   * anything. The old bodies stay in the server's files until it vacuums the table and recycles
   * its write-ahead log.
   */
  async sealSecrets(): Promise<number> {
    const sealer = this.sealer;
    if (sealer === undefined) return 0;
    return transaction(this.pool, async (tx) => {
      const rows = (await tx.unsafe(
        "SELECT kind, namespace, name, body FROM objects WHERE kind = 'Secret' FOR UPDATE",
      )) as ObjectRow[];
      const stale = rows.filter((r) => sealer.keyIdOf(r.body) !== sealer.sealingKeyId);
      const sealed = stale.map((r) => ({ ...r, body: this.bodyOf(r, this.textOf(r)) }));
      for (const r of sealed)
        await tx.unsafe(
          "UPDATE objects SET body = $1 WHERE kind = $2 AND namespace = $3 AND name = $4",
          [r.body, r.kind, r.namespace, r.name],
        );
      return sealed.length;
    });
  }

  async load(): Promise<DeployState> {
    const read = await transaction(
      this.pool,
      async (tx) => ({
        rv: (await tx.unsafe("SELECT value FROM meta WHERE key = 'resourceVersion'")) as {
          value: string;
        }[],
        objects: (await tx.unsafe(
          "SELECT kind, namespace, name, body FROM objects",
        )) as ObjectRow[],
        revisions: (await tx.unsafe("SELECT * FROM revisions")) as RevisionRow[],
        rollouts: (await tx.unsafe("SELECT ds_uid, record FROM rollouts")) as {
          ds_uid: string;
          record: RolloutRecord;
        }[],
        assignments: (await tx.unsafe("SELECT * FROM assignments")) as {
          ds_uid: string;
          node: string;
          hash: string;
          assigned_at: string;
        }[],
        statuses: (await tx.unsafe("SELECT ds_uid, body::text AS body FROM ds_statuses")) as {
          ds_uid: string;
          body: string;
        }[],
      }),
      "ISOLATION LEVEL REPEATABLE READ READ ONLY",
    );
    const rv = read.rv[0];
    return {
      resourceVersion: rv === undefined ? 0 : Number(rv.value),
      objects: read.objects.map((o) => ({
        kind: o.kind,
        namespace: o.namespace,
        name: o.name,
        object: JSON.parse(this.textOf(o)),
      })),
      revisions: read.revisions.map(revisionFromRow),
      rollouts: read.rollouts.map((r) => ({ dsUid: r.ds_uid, record: r.record })),
      assignments: read.assignments.map((a) => ({
        ...{ dsUid: a.ds_uid, node: a.node, hash: a.hash },
        at: Number(a.assigned_at),
      })),
      statuses: read.statuses.map((r) => shownOf(r.ds_uid, r.body)),
    };
  }

  async putObject(o: StoredObject, resourceVersion: number, revision?: RevisionRecord) {
    const rv = await transaction(this.pool, async (tx) => {
      const rv = await this.numbered(tx, resourceVersion);
      const body = this.bodyOf(o, JSON.stringify(restamp(o.object, resourceVersion, rv)));
      await tx.unsafe(
        `INSERT INTO objects (kind, namespace, name, body) VALUES ($1, $2, $3, $4)
         ON CONFLICT (kind, namespace, name) DO UPDATE SET body = excluded.body`,
        [o.kind, o.namespace, o.name, body],
      );
      await setResourceVersion(tx, rv);
      if (revision !== undefined)
        await upsertRows(tx, REVISIONS, [
          [
            ...[revision.dsUid, revision.hash, String(revision.revision)],
            ...[JSON.stringify(revision.template), changeCause(revision)],
            String(revision.createdAt),
          ],
        ]);
      await this.logged(tx, rv, o, { body, ...(revision !== undefined && { revision }) });
      return rv;
    });
    return this.committed(rv);
  }

  async deleteObject(
    key: { kind: string; namespace: string; name: string },
    resourceVersion: number,
    daemonSetUid?: string,
  ): Promise<number> {
    const rv = await transaction(this.pool, async (tx) => {
      const rv = await this.numbered(tx, resourceVersion);
      await tx.unsafe("DELETE FROM objects WHERE kind = $1 AND namespace = $2 AND name = $3", [
        key.kind,
        key.namespace,
        key.name,
      ]);
      await setResourceVersion(tx, rv);
      if (daemonSetUid !== undefined)
        for (const table of ["revisions", "rollouts", "assignments", "ds_statuses"])
          await tx.unsafe(`DELETE FROM ${table} WHERE ds_uid = $1`, [daemonSetUid]);
      if (key.kind !== "") await this.logged(tx, rv, key);
      return rv;
    });
    return this.committed(rv);
  }

  /** One transaction, under the leader's fence; logs what it wrote (not in a copy), so the
   * replicas that do not lead hold the assignments, prunes and statuses (shared.ts). */
  async writePass({ rollouts, assignments, pruned, statuses }: PassWrites): Promise<void> {
    if (rollouts.length + assignments.length + pruned.length + statuses.length === 0) return;
    const records = lastByKey(rollouts, (r) => r.dsUid);
    const changes = lastByKey(assignments, (c) => `${c.dsUid}\n${c.node}`);
    const gone = lastByKey(pruned, (r) => `${r.dsUid}\n${r.hash}`);
    const shown = lastByKey(statuses, (s) => s.dsUid);
    const rv = await transaction(this.pool, async (tx) => {
      await this.pool.leaderFence?.(tx);
      await upsertRows(
        tx,
        ROLLOUTS,
        records.map((r) => [r.dsUid, JSON.stringify(r.record)]),
      );
      await upsertRows(
        tx,
        ASSIGNMENTS,
        changes.flatMap((c) => (c.hash === null ? [] : [[c.dsUid, c.node, c.hash, String(c.at)]])),
      );
      await deleteRows(
        tx,
        ASSIGNMENTS,
        changes.filter((c) => c.hash === null).map((c) => [c.dsUid, c.node]),
      );
      await deleteRows(
        tx,
        REVISIONS,
        gone.map((r) => [r.dsUid, r.hash]),
      );
      await upsertRows(
        tx,
        STATUSES,
        shown.map((s) => [s.dsUid, shownText(s)]),
      );
      if (this.numbering.copy) return undefined;
      const rows: ChangeRow[] = [
        ...changes.map(assignRow),
        ...gone.map(pruneRow),
        ...shown.map(statusRow),
      ];
      const { feed } = this.numbering;
      return appendChanges(tx, rows, feed.origin, feed.now());
    });
    this.numbering.feed.committed(rv);
  }
}

/**
 * The deploy store on `pool`, its Secrets sealed with the sealing key first. Throws SealError
 * when a Secret does not open: the hub does not start.
 */
export async function openPostgresDeployStore(
  pool: PgPool,
  sealer: SecretSealer | undefined,
  log: Logger,
  numbering?: DeployNumbering,
): Promise<PostgresDeployStore> {
  const store = new PostgresDeployStore(pool, sealer, numbering);
  const resealed = await store.sealSecrets();
  if (resealed > 0) log.info("sealed stored Secrets with the sealing key", { resealed });
  return store;
}
