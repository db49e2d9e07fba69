// The audit log (audit.ts) in the hub's SQLite database: one row a record, its fields as JSON.
// Every method does its work before its promise is returned.
import type { Database } from "bun:sqlite";
import type { AuditEntry, AuditRecord, AuditStore } from "./audit.ts";

const SCHEMA = `CREATE TABLE IF NOT EXISTS audit (id INTEGER PRIMARY KEY AUTOINCREMENT, record TEXT NOT NULL)`;

export class SqliteAuditStore implements AuditStore {
  constructor(private readonly db: Database) {
    this.db.exec(SCHEMA);
  }

  async append(entry: AuditEntry): Promise<number> {
    const r = this.db
      .query("INSERT INTO audit (record) VALUES (?) RETURNING id")
      .get(JSON.stringify(entry)) as { id: number };
    return r.id;
  }

  async update(id: number, fields: Partial<AuditEntry>): Promise<void> {
    this.db
      .query("UPDATE audit SET record = json_patch(record, ?) WHERE id = ?")
      .run(JSON.stringify(fields), id);
  }

  async newest(limit: number, node?: string): Promise<AuditRecord[]> {
    const rows = (
      node === undefined
        ? this.db.query("SELECT id, record FROM audit ORDER BY id DESC LIMIT ?").all(limit)
        : this.db
            .query(
              "SELECT id, record FROM audit WHERE json_extract(record, '$.node') = ? ORDER BY id DESC LIMIT ?",
            )
            .all(node, limit)
    ) as { id: number; record: string }[];
    return rows.map((r) => ({ id: r.id, ...JSON.parse(r.record) }) as AuditRecord);
  }
}
