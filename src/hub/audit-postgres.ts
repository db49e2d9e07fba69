// The audit log (audit.ts) in the hub's PostgreSQL database (migration 2's `audit`): one row a
// record, its fields as json, its device (as a JSON string) in a column of its own for the log of
// one device. Ids
// come from an identity column, so they only grow, as SQLite's AUTOINCREMENT ids do; records are
// listed newest first by id in both. An append is written under a random key of its own, so an
// append run again after its session ended (its commit may have landed) stores one record.
import type { AuditEntry, AuditRecord, AuditStore } from "./audit.ts";
import { type PgPool, transaction } from "./pg/transaction.ts";

export class PostgresAuditStore implements AuditStore {
  constructor(private readonly pool: PgPool) {}

  async append(entry: AuditEntry): Promise<number> {
    const key = crypto.randomUUID();
    const rows = (await transaction(this.pool, async (tx) => {
      await tx.unsafe(
        `INSERT INTO audit (entry_key, node_key, record) VALUES ($1::uuid, $2, $3::text::json)
         ON CONFLICT (entry_key) DO NOTHING`,
        [key, JSON.stringify(entry.node), JSON.stringify(entry)],
      );
      return tx.unsafe("SELECT id FROM audit WHERE entry_key = $1::uuid", [key]);
    })) as { id: string }[];
    return Number(rows[0]?.id);
  }

  /** Merges `fields` into the record's top level (as SQLite's json_patch does with fields that
   * are not objects), in the process: jsonb's `||` would refuse a string holding NUL. */
  async update(id: number, fields: Partial<AuditEntry>): Promise<void> {
    await transaction(this.pool, async (tx) => {
      const rows = (await tx.unsafe("SELECT record FROM audit WHERE id = $1 FOR UPDATE", [id])) as {
        record: AuditEntry;
      }[];
      const row = rows[0];
      if (row === undefined) return;
      const record = { ...row.record, ...JSON.parse(JSON.stringify(fields)) };
      await tx.unsafe("UPDATE audit SET node_key = $1, record = $2::text::json WHERE id = $3", [
        JSON.stringify(record.node),
        JSON.stringify(record),
        id,
      ]);
    });
  }

  async newest(limit: number, node?: string): Promise<AuditRecord[]> {
    const rows = (await transaction(this.pool, (tx) =>
      node === undefined
        ? tx.unsafe("SELECT id, record FROM audit ORDER BY id DESC LIMIT $1", [limit])
        : tx.unsafe("SELECT id, record FROM audit WHERE node_key = $1 ORDER BY id DESC LIMIT $2", [
            JSON.stringify(node),
            limit,
          ]),
    )) as { id: string; record: AuditEntry }[];
    return rows.map((r) => ({ id: Number(r.id), ...r.record }) as AuditRecord);
  }
}
