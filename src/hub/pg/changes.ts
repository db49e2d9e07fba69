// The change log of the hub's PostgreSQL database (migration 4, docs/hub-replicas.md, "The
// store"): every write of watchable state (nodes, pods, events, DaemonSets, ConfigMaps,
// Secrets) appends its changes to `changes` in its own transaction, numbered from one sequence
// under pg_advisory_xact_lock(CHANGES_LOCK), taken just before the numbers are drawn and held to
// the commit: numbers are committed in the order they are drawn, across replicas, so a reader
// that saw rv N has seen every change numbered below it. Every replica follows the log
// (follower.ts). The log is trimmed by age and count; the highest trimmed rv is kept in `meta`
// ('changes_floor'): a watch from below it is answered 410 Gone.
import { randomUUID } from "node:crypto";
import type { SQL } from "bun";
import { CHANGES_LOCK } from "./locks.ts";
import type { PgPool } from "./transaction.ts";

/** One change as written. `object`: the object's JSON text (a Secret's sealed body), or null on
 * a tombstone watchers are not told of (an event trimmed); a tombstone with an object carries
 * the object's last state. */
export interface ChangeRow {
  kind: string;
  key: string;
  deleted: boolean;
  object: string | null;
}

/** A row read back, with its number and whether this process wrote it. */
export interface LoggedChange extends ChangeRow {
  rv: number;
  own: boolean;
}

/** Rows per statement (each column one array parameter). */
const CHUNK = 1000;

/** Who writes the log from this process, and who is told of what it committed; `now` dates
 * its rows (and the trim, with the same clock, judges their age). */
export class ChangeFeed {
  /** This process's mark on its rows (random: two replicas may share a name). */
  readonly origin = randomUUID();
  private readonly listeners = new Set<(rv: number) => void>();

  constructor(readonly now: () => number = Date.now) {}

  /** Calls `fn` with the highest rv of each transaction this process committed. */
  onCommitted(fn: (rv: number) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  committed(rv: number | undefined): void {
    if (rv === undefined) return;
    for (const fn of this.listeners) fn(rv);
  }
}

/** Appends `rows`, in their order, in transaction `tx`; gives the highest rv drawn (undefined
 * when there were none). */
export async function appendChanges(
  tx: SQL,
  rows: readonly ChangeRow[],
  origin: string,
  now: number,
): Promise<number | undefined> {
  if (rows.length === 0) return undefined;
  await tx.unsafe(`SELECT pg_advisory_xact_lock(${CHANGES_LOCK})`);
  let last: number | undefined;
  for (let i = 0; i < rows.length; i += CHUNK) {
    const part = rows.slice(i, i + CHUNK);
    const got = (await tx.unsafe(
      `INSERT INTO changes (rv, kind, key, deleted, object, origin, at)
       SELECT nextval('changes_rv'), r.kind, r.key, r.deleted, r.object, $5, $6
       FROM unnest($1::text[], $2::text[], $3::boolean[], $4::text[])
         WITH ORDINALITY AS r(kind, key, deleted, object, i) ORDER BY r.i
       RETURNING rv`,
      [
        part.map((r) => r.kind),
        part.map((r) => r.key),
        part.map((r) => r.deleted),
        part.map((r) => r.object),
        origin,
        now,
      ],
    )) as { rv: string }[];
    for (const g of got) last = Math.max(last ?? 0, Number(g.rv));
  }
  return last;
}

/** Draws one rv for a write that must know its number before it writes (a deploy object's
 * resourceVersion), under the lock: at least `atLeast` (a number given by a copy from SQLite). */
export async function drawRv(tx: SQL, atLeast = 0): Promise<number> {
  await tx.unsafe(`SELECT pg_advisory_xact_lock(${CHANGES_LOCK})`);
  const [row] = (await tx.unsafe("SELECT nextval('changes_rv') AS rv")) as { rv: string }[];
  const rv = Number(row?.rv);
  if (rv >= atLeast) return rv;
  await tx.unsafe("SELECT setval('changes_rv', $1)", [atLeast]);
  return atLeast;
}

/** Appends one row numbered `rv` (drawn with drawRv in the same transaction). */
export async function appendAt(
  tx: SQL,
  rv: number,
  row: ChangeRow,
  origin: string,
  now: number,
): Promise<void> {
  await tx.unsafe(
    "INSERT INTO changes (rv, kind, key, deleted, object, origin, at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    [rv, row.kind, row.key, row.deleted, row.object, origin, now],
  );
}

/** The highest rv committed, as seen by transaction `tx` (read with what it loads). */
export async function loggedRv(tx: SQL): Promise<number> {
  const [row] = (await tx.unsafe(
    `SELECT greatest(coalesce((SELECT max(rv) FROM changes), 0),
       coalesce((SELECT value::bigint FROM meta WHERE key = 'changes_floor'), 0)) AS rv`,
  )) as { rv: string }[];
  return Number(row?.rv ?? 0);
}

/** The rows after `after`, oldest first, at most `limit`; and the trim's floor: one statement
 * (one snapshot, one round trip). With no rows it gives one row of nulls, carrying the floor. */
export async function readChanges(
  pool: PgPool,
  after: number,
  origin: string,
  limit = 5000,
): Promise<{ rows: LoggedChange[]; floor: number }> {
  const got = (await pool.sql.unsafe(
    `SELECT c.rv, c.kind, c.key, c.deleted, c.object, c.origin, f.floor
     FROM (SELECT (SELECT value FROM meta WHERE key = 'changes_floor') AS floor) f
     LEFT JOIN LATERAL (SELECT rv, kind, key, deleted, object, origin FROM changes
       WHERE rv > $1 ORDER BY rv LIMIT $2) c ON true
     ORDER BY c.rv`,
    [after, limit],
  )) as (Omit<ChangeRow, "kind"> & {
    kind: string | null;
    rv: string | null;
    origin: string;
    floor: string | null;
  })[];
  const rows: LoggedChange[] = [];
  for (const r of got)
    if (r.rv !== null && r.kind !== null)
      rows.push({
        rv: Number(r.rv),
        kind: r.kind,
        key: r.key,
        deleted: r.deleted,
        object: r.object,
        own: r.origin === origin,
      });
  return { rows, floor: Number(got[0]?.floor ?? 0) };
}

/** How long and how many rows the log keeps. */
export interface TrimLimits {
  maxAgeMs: number;
  maxRows: number;
}

/** Deletes the rows older than `maxAgeMs` or past the newest `maxRows`; gives the floor (the
 * highest rv ever trimmed). Run by every replica: it is idempotent. */
export async function trimChanges(pool: PgPool, limits: TrimLimits, now: number): Promise<number> {
  return pool.sql.begin(async (tx) => {
    const [cut] = (await tx.unsafe(
      `SELECT greatest(
         coalesce((SELECT max(rv) FROM changes WHERE at < $1), 0),
         coalesce((SELECT max(rv) FROM changes), 0) - $2) AS rv`,
      [now - limits.maxAgeMs, limits.maxRows],
    )) as { rv: string }[];
    const rv = Number(cut?.rv ?? 0);
    if (rv > 0) {
      await tx.unsafe("DELETE FROM changes WHERE rv <= $1", [rv]);
      await tx.unsafe(
        `INSERT INTO meta (key, value) VALUES ('changes_floor', $1)
         ON CONFLICT (key) DO UPDATE SET value = greatest(meta.value::bigint, excluded.value::bigint)::text`,
        [String(rv)],
      );
    }
    const [floor] = (await tx.unsafe("SELECT value FROM meta WHERE key = 'changes_floor'")) as {
      value: string;
    }[];
    return Number(floor?.value ?? 0);
  });
}
