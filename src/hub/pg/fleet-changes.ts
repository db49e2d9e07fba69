// The change log's rows (changes.ts) of the fleet store's writes: a flush of agents' reports and
// a node forgotten. Keys: a node's name; "<node>/<uid>" of a pod; "<node>/<name>" of an event
// (a node's name, a DNS subdomain, holds no "/"). A node's row carries its stored record,
// `{"progress": …, "node": …}`, read back after the write, so it is whole whichever part the
// flush changed; a node whose only queued change is its acknowledged seq (each report's) has no
// row: other replicas do not use it (a replica taking the node over reads it from `nodes`). A pod deleted (or cleared with its node's stream) carries its last stored state,
// read before the write; one never stored (added and deleted between two flushes) has no row.
// An event trimmed by the per-node limit is a tombstone without object (watchers were not told).
import type { SQL } from "bun";
import type { ReportBatch } from "../report-queue.ts";
import type { NodeProgress } from "../store.ts";
import type { ChangeRow } from "./changes.ts";

export const podKey = (node: string, uid: string) => `${node}/${uid}`;

/** The node of a pod's or an event's key, and the rest. */
export function splitKey(key: string): [string, string] {
  const at = key.indexOf("/");
  return [key.slice(0, at), key.slice(at + 1)];
}

/** The stored state of each pod the batch deletes or clears, by podKey: read before it writes. */
export async function podTombstones(tx: SQL, b: ReportBatch): Promise<Map<string, string>> {
  const deleted = [...b.pods.values()].filter((p) => p.pod === null);
  if (b.cleared.size === 0 && deleted.length === 0) return new Map();
  const rows = (await tx.unsafe(
    `SELECT node, uid, pod::text AS pod FROM pods WHERE node = ANY($1::text[])
     OR (node, uid) IN (SELECT * FROM unnest($2::text[], $3::text[]))`,
    [[...b.cleared], deleted.map((p) => p.node), deleted.map((p) => p.uid)],
  )) as { node: string; uid: string; pod: string }[];
  return new Map(rows.map((r) => [podKey(r.node, r.uid), r.pod]));
}

/** The stored record of each node in `names`, as a node row's object. */
async function nodeObjects(tx: SQL, names: string[]): Promise<Map<string, string>> {
  if (names.length === 0) return new Map();
  const rows = (await tx.unsafe(
    "SELECT name, progress::text AS progress, node::text AS node FROM nodes WHERE name = ANY($1::text[])",
    [names],
  )) as { name: string; progress: string; node: string | null }[];
  return new Map(
    rows.map((r) => [r.name, `{"progress":${r.progress},"node":${r.node ?? "null"}}`]),
  );
}

/**
 * Sets node `p.name`'s stored credential to `p`'s (a join: the new credential is the joining
 * replica's to write, whichever replica's session the node last had, whose fields the fence
 * keeps otherwise); a rotation still pending is dropped. Gives the node's change row.
 */
export async function setCredential(tx: SQL, p: NodeProgress): Promise<ChangeRow[]> {
  const creds = {
    credentialHash: p.credentialHash,
    ...(p.credentialIssuedAt !== undefined && { credentialIssuedAt: p.credentialIssuedAt }),
    ...(p.credentialExpiresAt !== undefined && { credentialExpiresAt: p.credentialExpiresAt }),
  };
  const rows = (await tx.unsafe(
    `UPDATE nodes SET progress = ((progress::jsonb - 'pendingCredential') || $2::text::jsonb)::json
     WHERE name = $1 RETURNING progress::text AS progress, node::text AS node`,
    [p.name, JSON.stringify(creds)],
  )) as { progress: string; node: string | null }[];
  return rows.map((r) => ({
    kind: "nodes",
    key: p.name,
    deleted: false,
    object: `{"progress":${r.progress},"node":${r.node ?? "null"}}`,
  }));
}

/** The rows of a batch written in `tx` (after the write): the cleared pods' tombstones, the
 * nodes, the pods, the events. */
export async function batchChanges(
  tx: SQL,
  b: ReportBatch,
  tombstones: Map<string, string>,
): Promise<ChangeRow[]> {
  const rows: ChangeRow[] = [];
  const gone = new Set<string>();
  for (const [key, object] of tombstones) {
    if (!b.cleared.has(splitKey(key)[0])) continue;
    rows.push({ kind: "pods", key, deleted: true, object });
    gone.add(key);
  }
  const progressed = [...b.progress.keys()].filter((name) => !b.seqOnly.has(name));
  const names = [...new Set([...progressed, ...b.nodeObjects.keys()])];
  for (const [key, object] of await nodeObjects(tx, names))
    rows.push({ kind: "nodes", key, deleted: false, object });
  for (const p of b.pods.values()) {
    const key = podKey(p.node, p.uid);
    if (p.pod !== null)
      rows.push({ kind: "pods", key, deleted: false, object: JSON.stringify(p.pod) });
    else if (!gone.has(key) && tombstones.has(key))
      rows.push({ kind: "pods", key, deleted: true, object: tombstones.get(key) ?? null });
  }
  for (const e of b.events.values())
    rows.push({
      kind: "events",
      key: podKey(e.node, e.name),
      deleted: e.event === null,
      object: e.event === null ? null : JSON.stringify(e.event),
    });
  return rows;
}

/** Deletes node `name` with its pods and events in `tx`; gives their rows (pods, events, then
 * the node, each with its last state). */
export async function forgetNode(tx: SQL, name: string): Promise<ChangeRow[]> {
  const pods = (await tx.unsafe(
    "DELETE FROM pods WHERE node = $1 RETURNING uid, pod::text AS pod",
    [name],
  )) as { uid: string; pod: string }[];
  const events = (await tx.unsafe(
    "DELETE FROM events WHERE node = $1 RETURNING name, event::text AS event",
    [name],
  )) as { name: string; event: string }[];
  const node = (await nodeObjects(tx, [name])).get(name);
  await tx.unsafe("DELETE FROM nodes WHERE name = $1", [name]);
  await tx.unsafe("DELETE FROM node_update_reports WHERE node = $1", [name]);
  return [
    ...pods.map((p) => ({ kind: "pods", key: podKey(name, p.uid), deleted: true, object: p.pod })),
    ...events.map((e) => ({
      kind: "events",
      key: podKey(name, e.name),
      deleted: true,
      object: e.event,
    })),
    ...(node === undefined ? [] : [{ kind: "nodes", key: name, deleted: true, object: node }]),
  ];
}
