// The wanted releases of nodes (store.ts) in the hub's PostgreSQL database (migration 2's
// `node_updates`). A write is one transaction of multi-row statements (pg/rows.ts), each
// idempotent (an upsert, a delete), so it may be run again after its session ended.
import type { SQL } from "bun";
import { type Columns, deleteRows, lastByKey, upsertRows } from "../pg/rows.ts";
import { type PgPool, transaction } from "../pg/transaction.ts";
import type { UpdateStore, WantedChange, WantedRelease } from "./store.ts";

const NODE_UPDATES: Columns = {
  table: "node_updates",
  key: ["node"],
  types: { node: "text", version: "text", set_at: "bigint" },
};

export class PostgresUpdateStore implements UpdateStore {
  constructor(private readonly pool: PgPool) {}

  async load(): Promise<WantedRelease[]> {
    const rows = (await transaction(this.pool, (tx) =>
      tx.unsafe("SELECT node, version, set_at FROM node_updates"),
    )) as { node: string; version: string; set_at: string }[];
    return rows.map((r) => ({ node: r.node, version: r.version, setAt: Number(r.set_at) }));
  }

  async write(changes: readonly WantedChange[]): Promise<void> {
    if (changes.length === 0) return;
    // A later change of one node wins.
    const last = lastByKey(changes, (c) => c.node);
    const puts = last.flatMap((c) =>
      c.version === null ? [] : [[c.node, c.version, String(c.setAt)]],
    );
    const deletes = last.filter((c) => c.version === null).map((c) => [c.node]);
    await transaction(this.pool, async (tx: SQL) => {
      await upsertRows(tx, NODE_UPDATES, puts);
      await deleteRows(tx, NODE_UPDATES, deletes);
    });
  }
}
