// Join tokens in PostgreSQL (the hub store's `join_tokens`, store-postgres.ts): a row read back
// as a record, a token written, and a join's use counted by the stored row.
import type { SQL } from "bun";
import { StatusError } from "../../api/status.ts";
import type { JoinTokenRecord, NodeProgress } from "../store.ts";
import { joinTokenRefusal } from "../tokens.ts";

export interface TokenRow {
  id: string;
  hash: string;
  expires_at: string;
  labels: Record<string, string>;
  revoked: boolean;
  created_at: string;
  max_uses: number | null;
  used: number;
}

export const tokenFromRow = (t: TokenRow): JoinTokenRecord => ({
  id: t.id,
  hash: t.hash,
  expiresAt: Number(t.expires_at),
  labels: t.labels,
  revoked: t.revoked,
  createdAt: Number(t.created_at),
  ...(t.max_uses !== null && { maxUses: t.max_uses }),
  used: t.used,
});

export async function putJoinToken(tx: SQL, t: JoinTokenRecord): Promise<void> {
  await tx.unsafe(
    `INSERT INTO join_tokens (id, hash, expires_at, labels, revoked, created_at, max_uses, used)
     VALUES ($1, $2, $3, $4::text::json, $5, $6, $7, $8)
     ON CONFLICT (id) DO UPDATE SET hash = excluded.hash, expires_at = excluded.expires_at,
       labels = excluded.labels, revoked = join_tokens.revoked OR excluded.revoked,
       created_at = excluded.created_at, max_uses = excluded.max_uses,
       used = GREATEST(join_tokens.used, excluded.used)`,
    [
      t.id,
      t.hash,
      t.expiresAt,
      JSON.stringify(t.labels),
      t.revoked,
      t.createdAt,
      t.maxUses ?? null,
      t.used,
    ],
  );
}

/**
 * Counts one use of join token `t` at `now`, in one conditional statement: refused (a
 * StatusError saying why, and the transaction with it) when the stored token is revoked, expired
 * or at its limit, so that joins at any number of replicas at once never pass it more often than
 * it allows (the row's lock orders them; each sees the count the one before committed). Run
 * before the node is written, so that it can tell a join whose commit already landed.
 */
export async function useJoinToken(
  tx: SQL,
  t: JoinTokenRecord,
  joined: NodeProgress,
  now: number,
): Promise<void> {
  // Run again after a lost session whose commit landed: the node holds the new credential (a
  // random one of this join), and the use was counted with it.
  const landed = await tx.unsafe(
    "SELECT 1 FROM nodes WHERE name = $1 AND progress->>'credentialHash' = $2",
    [joined.name, joined.credentialHash],
  );
  if (landed.length > 0) return;
  const used = await tx.unsafe(
    `UPDATE join_tokens SET used = used + 1
     WHERE hash = $1 AND NOT revoked AND expires_at > $2 AND (max_uses IS NULL OR used < max_uses)
     RETURNING used`,
    [t.hash, now],
  );
  if (used.length > 0) return;
  const rows = (await tx.unsafe("SELECT * FROM join_tokens WHERE hash = $1", [
    t.hash,
  ])) as TokenRow[];
  const stored = rows[0] === undefined ? undefined : tokenFromRow(rows[0]);
  throw new StatusError("Unauthorized", joinTokenRefusal(stored, now) ?? "unknown join token");
}
