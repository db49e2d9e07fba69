// What operators write of a node, kept against a replica's older view of it (hub replicas): a
// replica writes a node's whole progress from what it holds, and another replica may have
// stored an operator's change of it that this one has not followed yet (the change log's row
// is read after the write, or the write was queued before it). A revoke is never taken back (a
// revoked node is forgotten, not restored), and the hub's labels stored with a later stamp
// (`hubLabelsAt`) than the written ones are kept. The flush's fence (node-sessions.ts) locks the
// node's session row first, which another replica's write of the node locks too, so a change
// committed after this read waits for the write and is then written over it as it was made; a
// node no replica ever held has no such row (two writes of it at once are ordered by their
// upserts alone).
import type { SQL } from "bun";
import type { ReportBatch } from "../report-queue.ts";
import type { NodeProgress } from "../store.ts";

/** What operators set of a node, as stored. */
export type OperatorFields = Partial<Pick<NodeProgress, "revokedAt" | "hubLabels" | "hubLabelsAt">>;

/** `mine` with the operator's fields of `stored` where they are newer. */
export function withOperatorFields(mine: NodeProgress, stored: OperatorFields): NodeProgress {
  let out = mine;
  if (stored.revokedAt !== undefined && mine.revokedAt === undefined)
    out = { ...out, revokedAt: stored.revokedAt };
  const at = stored.hubLabelsAt ?? 0;
  if (stored.hubLabels !== undefined && at > (mine.hubLabelsAt ?? 0))
    out = { ...out, hubLabels: stored.hubLabels, hubLabelsAt: at };
  return out;
}

interface Row {
  name: string;
  revoked: string | null;
  labels_at: string | null;
  labels: Record<string, string> | null;
}

const fieldsOf = (r: Row): OperatorFields => ({
  ...(r.revoked !== null && { revokedAt: Number(r.revoked) }),
  ...(r.labels !== null && { hubLabels: r.labels }),
  ...(r.labels_at !== null && { hubLabelsAt: Number(r.labels_at) }),
});

/** Sets the progress of `b`'s nodes not in `skip` (fenced: the fence kept what was stored) to
 * keep what operators stored later, in transaction `tx`, after the fence. */
export async function keepOperatorFields(
  tx: SQL,
  b: ReportBatch,
  skip: ReadonlySet<string>,
): Promise<void> {
  const names = [...b.progress.keys()].filter((n) => !skip.has(n));
  if (names.length === 0) return;
  const rows = (await tx.unsafe(
    `SELECT name, progress->>'revokedAt' AS revoked, progress->>'hubLabelsAt' AS labels_at,
       progress->'hubLabels' AS labels
     FROM nodes WHERE name = ANY($1::text[])`,
    [names],
  )) as Row[];
  for (const row of rows) {
    const mine = b.progress.get(row.name);
    if (mine === undefined) continue;
    const kept = withOperatorFields(mine, fieldsOf(row));
    if (kept !== mine) b.progress.set(row.name, kept);
  }
}
