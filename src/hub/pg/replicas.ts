// Replicas prove they are alive in the store (migration 7; docs/hub-replicas.md, "Agents and
// replicas"): each replica process counts up its row of `replicas` every few seconds, and the
// leader releases the nodes held by a process whose beat stopped (dead-holders.ts): their
// sessions' epochs move on (a late flush of the old holder is fenced, node-sessions.ts) and
// the nodes stored online are stored offline, logged so every replica's view and watches see it.
import type { SQL } from "bun";
import type { NodeProgress } from "../store.ts";
import { appendChanges, type ChangeRow } from "./changes.ts";

/** Counts up the beat of process `origin` (replica `replica`) at `now` and gives every
 * process's beat, its own among them, in one statement. */
export async function beat(
  sql: SQL,
  origin: string,
  replica: string,
  now: number,
): Promise<Map<string, number>> {
  const rows = (await sql.unsafe(
    `WITH mine AS (
       INSERT INTO replicas (origin, replica, beat, seen_at) VALUES ($1, $2, 1, $3)
       ON CONFLICT (origin) DO UPDATE SET beat = replicas.beat + 1, seen_at = excluded.seen_at
       RETURNING origin, beat)
     SELECT origin, beat::text AS beat FROM mine
     UNION ALL SELECT origin, beat::text FROM replicas WHERE origin <> $1`,
    [origin, replica, now],
  )) as { origin: string; beat: string }[];
  return new Map(rows.map((r) => [r.origin, Number(r.beat)]));
}

/** The processes named as holders by node sessions ('' for sessions taken before migration 7). */
export async function holderOrigins(sql: SQL): Promise<string[]> {
  const rows = (await sql.unsafe(
    "SELECT DISTINCT origin FROM node_sessions WHERE origin IS NOT NULL",
  )) as { origin: string }[];
  return rows.map((r) => r.origin);
}

/** What a release did: the nodes whose sessions ended, and those of them marked offline. */
export interface Released {
  nodes: string[];
  offline: string[];
}

/**
 * Releases, in the transaction `tx`, what the dead processes `dead` held (origin → the beat it
 * was judged dead at; undefined: it has no row). A process whose row's beat moved on since is
 * alive after all and keeps its nodes; the rows of the others are deleted. Their sessions are
 * ended (held by none, epoch + 1), locked in name order as claims and flushes lock them, and
 * their nodes stored online are stored offline since `now`, each logged as `origin`'s change.
 * Gives what was released and the log's highest rv.
 */
export async function releaseDead(
  tx: SQL,
  dead: ReadonlyMap<string, number | undefined>,
  origin: string,
  now: number,
): Promise<Released & { rv?: number }> {
  const rowed = [...dead].filter((d): d is [string, number] => d[1] !== undefined);
  const deleted = (await tx.unsafe(
    `DELETE FROM replicas WHERE (origin, beat) IN
       (SELECT * FROM unnest($1::text[], $2::bigint[])) RETURNING origin`,
    [rowed.map((d) => d[0]), rowed.map((d) => d[1])],
  )) as { origin: string }[];
  const origins = [
    ...[...dead].filter((d) => d[1] === undefined).map((d) => d[0]),
    ...deleted.map((d) => d.origin),
  ];
  if (origins.length === 0) return { nodes: [], offline: [] };
  const sessions = (await tx.unsafe(
    "SELECT node FROM node_sessions WHERE origin = ANY($1::text[]) ORDER BY node FOR UPDATE",
    [origins],
  )) as { node: string }[];
  const nodes = sessions.map((s) => s.node);
  if (nodes.length === 0) return { nodes, offline: [] };
  await tx.unsafe(
    `UPDATE node_sessions SET epoch = epoch + 1, replica = '', origin = NULL, taken_at = $2
     WHERE node = ANY($1::text[])`,
    [nodes, now],
  );
  const rows = await markOffline(tx, nodes, now);
  const rv = await appendChanges(tx, rows, origin, now);
  return { nodes, offline: rows.map((r) => r.key), ...(rv !== undefined && { rv }) };
}

/** Stores offline since `now` those of `nodes` stored online; gives their change rows. */
async function markOffline(tx: SQL, nodes: string[], now: number): Promise<ChangeRow[]> {
  const stored = (await tx.unsafe(
    `SELECT name, progress, node::text AS node FROM nodes WHERE name = ANY($1::text[])
     ORDER BY name FOR UPDATE`,
    [nodes],
  )) as { name: string; progress: NodeProgress; node: string | null }[];
  const rows: ChangeRow[] = [];
  const updates: [string, string][] = [];
  for (const s of stored) {
    if (s.progress.online !== true) continue;
    const progress = JSON.stringify({ ...s.progress, online: false, offlineSince: now });
    updates.push([s.name, progress]);
    const object = `{"progress":${progress},"node":${s.node ?? "null"}}`;
    rows.push({ kind: "nodes", key: s.name, deleted: false, object });
  }
  if (updates.length > 0)
    await tx.unsafe(
      `UPDATE nodes SET progress = u.p::json FROM unnest($1::text[], $2::text[]) AS u(n, p)
       WHERE nodes.name = u.n`,
      [updates.map((u) => u[0]), updates.map((u) => u[1])],
    );
  return rows;
}
