// node_sessions on PostgreSQL (migration 5; node-sessions.ts): taking a node, and fencing a
// flush. Both lock the node's row of node_sessions, so they are ordered: a claim waits for a
// flush that read the row before it (FOR SHARE) to commit, and then reads what that flush wrote;
// a flush that comes after a claim finds the new epoch and drops the old holder's rows.
import type { SQL } from "bun";
import type { Node } from "../../api/node.ts";
import type { Event, Pod } from "../../api/types.ts";
import { keepHolderFields, type NodeClaim, type StoredNode } from "../node-sessions.ts";
import type { ReportBatch } from "../report-queue.ts";
import type { NodeProgress } from "../store.ts";
import { withOperatorFields } from "./operator-fields.ts";

/** Takes the nodes `held` names (distinct) for `holder` (the replica's name and its process's
 * origin, whose beat shows it alive: pg/replicas.ts) in the transaction `tx`, in one
 * statement, locking their rows in the order fenceBatch does; `held` gives the epoch this
 * replica held each with, if it did. A node is read back when someone else took it since. */
export async function claimNodes(
  tx: SQL,
  held: ReadonlyMap<string, number | undefined>,
  holder: { replica: string; origin: string },
  now: number,
): Promise<Map<string, NodeClaim>> {
  const rows = (await tx.unsafe(
    `INSERT INTO node_sessions (node, replica, epoch, taken_at, origin)
     SELECT n, $2, 1, $3, $4 FROM unnest($1::text[]) AS u(n) ORDER BY n
     ON CONFLICT (node) DO UPDATE SET replica = excluded.replica,
       epoch = node_sessions.epoch + 1, taken_at = excluded.taken_at, origin = excluded.origin
     RETURNING node, epoch::text AS epoch`,
    [[...held.keys()], holder.replica, now, holder.origin],
  )) as { node: string; epoch: string }[];
  const epochs = new Map(rows.map((r) => [r.node, Number(r.epoch)]));
  const stale = [...epochs].filter(([name, epoch]) => {
    const h = held.get(name);
    return h === undefined || epoch !== h + 1;
  });
  const stored = await readNodes(
    tx,
    stale.map(([name]) => name),
  );
  const claims = new Map<string, NodeClaim>();
  for (const [name, epoch] of epochs) {
    const s = stored.get(name);
    claims.set(name, s === undefined ? { epoch } : { epoch, stored: s });
  }
  return claims;
}

/** The stored nodes of `names` with their pods and events (absent: not stored). */
async function readNodes(tx: SQL, names: string[]): Promise<Map<string, StoredNode>> {
  const out = new Map<string, StoredNode>();
  if (names.length === 0) return out;
  const nodes = (await tx.unsafe(
    "SELECT name, progress, node FROM nodes WHERE name = ANY($1::text[])",
    [names],
  )) as { name: string; progress: NodeProgress; node: Node | null }[];
  if (nodes.length === 0) return out;
  const found = nodes.map((n) => n.name);
  const pods = (await tx.unsafe("SELECT node, pod FROM pods WHERE node = ANY($1::text[])", [
    found,
  ])) as { node: string; pod: Pod }[];
  const events = (await tx.unsafe("SELECT node, event FROM events WHERE node = ANY($1::text[])", [
    found,
  ])) as { node: string; event: Event }[];
  for (const n of nodes)
    out.set(n.name, {
      progress: n.progress,
      ...(n.node !== null && { node: n.node }),
      pods: [],
      events: [],
    });
  for (const p of pods) out.get(p.node)?.pods.push(p.pod);
  for (const e of events) out.get(e.node)?.events.push(e.event);
  return out;
}

/** The nodes a batch writes anything of, sorted (rows are locked in one order). */
export function nodesOf(b: ReportBatch): string[] {
  const names = new Set([...b.progress.keys(), ...b.nodeObjects.keys(), ...b.cleared]);
  for (const p of b.pods.values()) names.add(p.node);
  for (const e of b.events.values()) names.add(e.node);
  return [...names].sort();
}

/** Drops from `b` the reports of `fenced` nodes (their Node, pods, events, clears). */
function dropReports(b: ReportBatch, fenced: Set<string>): void {
  for (const name of fenced) {
    b.nodeObjects.delete(name);
    b.cleared.delete(name);
  }
  for (const [key, p] of b.pods) if (fenced.has(p.node)) b.pods.delete(key);
  for (const [key, e] of b.events) if (fenced.has(e.node)) b.events.delete(key);
}

/**
 * Fences the batch `b` in the transaction that writes it: a node whose stored epoch is not the
 * one in `epochs` (the epochs this replica held its nodes with when the batch was taken; absent:
 * not held) was taken by another replica, so its reports are dropped from `b` and its progress
 * keeps the holder's fields as stored, and what operators stored later (operator-fields.ts; an
 * operator's change of it is still written). Nodes no replica took (or forgotten since) pass.
 * The session rows are locked (FOR UPDATE): two replicas' writes of one node are one after the
 * other, each reading what the other committed. Returns the fenced nodes.
 */
export async function fenceBatch(
  tx: SQL,
  b: ReportBatch,
  epochs: ReadonlyMap<string, number>,
): Promise<string[]> {
  const names = nodesOf(b);
  if (names.length === 0) return [];
  const rows = (await tx.unsafe(
    `SELECT node, epoch::text AS epoch FROM node_sessions WHERE node = ANY($1::text[])
     ORDER BY node FOR UPDATE`,
    [names],
  )) as { node: string; epoch: string }[];
  const fenced = new Set(
    rows.filter((r) => epochs.get(r.node) !== Number(r.epoch)).map((r) => r.node),
  );
  if (fenced.size === 0) return [];
  dropReports(b, fenced);
  const progressOf = [...fenced].filter((n) => b.progress.has(n));
  if (progressOf.length > 0) {
    // Locked, so the holder's write of a row (a newer seq) cannot land between this read and
    // this write of it.
    const stored = (await tx.unsafe(
      "SELECT name, progress FROM nodes WHERE name = ANY($1::text[]) ORDER BY name FOR UPDATE",
      [progressOf],
    )) as { name: string; progress: NodeProgress }[];
    const byName = new Map(stored.map((s) => [s.name, s.progress]));
    for (const name of progressOf) {
      const theirs = byName.get(name);
      const mine = b.progress.get(name);
      // No stored row (the node was forgotten): nothing of a holder's to keep.
      if (theirs !== undefined && mine !== undefined)
        b.progress.set(name, withOperatorFields(keepHolderFields(mine, theirs), theirs));
    }
  }
  return [...fenced];
}
