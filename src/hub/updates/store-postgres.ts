// The wanted releases of nodes (store.ts) in the hub's PostgreSQL database (migration 2's
// `node_updates`). A write is one transaction of multi-row statements (pg/rows.ts), each
// idempotent (an upsert, a delete), so it may be run again after its session ended; its changes
// go to the change log in the same transaction (shared.ts), as does what this replica shares of
// an agent's update (kept in node_update_reports, a column pair a kind of report). A copy
// (`hub migrate`) logs nothing.
import type { SQL } from "bun";
import type { UpdateStatus } from "../../protocol/index.ts";
import { appendChanges, ChangeFeed, type ChangeRow } from "../pg/changes.ts";
import { type Columns, deleteRows, lastByKey, upsertRows } from "../pg/rows.ts";
import { type PgPool, transaction } from "../pg/transaction.ts";
import { reportRow, wishRow } from "./shared.ts";
import type {
  SharedReport,
  StoredReports,
  UpdateStore,
  WantedChange,
  WantedRelease,
} from "./store.ts";

const NODE_UPDATES: Columns = {
  table: "node_updates",
  key: ["node"],
  types: { node: "text", version: "text", set_at: "bigint" },
};

export class PostgresUpdateStore implements UpdateStore {
  constructor(
    private readonly pool: PgPool,
    private readonly feed = new ChangeFeed(),
    private readonly copy = false,
  ) {}

  async load(): Promise<WantedRelease[]> {
    const rows = (await transaction(this.pool, (tx) =>
      tx.unsafe("SELECT node, version, set_at FROM node_updates"),
    )) as { node: string; version: string; set_at: string }[];
    return rows.map((r) => ({ node: r.node, version: r.version, setAt: Number(r.set_at) }));
  }

  async write(changes: readonly WantedChange[]): Promise<number | undefined> {
    if (changes.length === 0) return undefined;
    // A later change of one node wins.
    const last = lastByKey(changes, (c) => c.node);
    const puts = last.flatMap((c) =>
      c.version === null ? [] : [[c.node, c.version, String(c.setAt)]],
    );
    const deletes = last.filter((c) => c.version === null).map((c) => [c.node]);
    return this.logged(last.map(wishRow), async (tx) => {
      await upsertRows(tx, NODE_UPDATES, puts);
      await deleteRows(tx, NODE_UPDATES, deletes);
    });
  }

  share(node: string, report: SharedReport): Promise<number | undefined> {
    return this.logged([reportRow(node, report)], (tx) => keepReport(tx, node, report));
  }

  async loadReports(): Promise<StoredReports[]> {
    const rows = (await transaction(this.pool, (tx) =>
      tx.unsafe(
        "SELECT node, status, status_at, offered, offered_at, agent FROM node_update_reports",
      ),
    )) as {
      node: string;
      status: UpdateStatus | null;
      status_at: string | null;
      offered: string | null;
      offered_at: string | null;
      agent: { version: string; updates: boolean } | null;
    }[];
    return rows.map((r) => ({
      node: r.node,
      ...(r.status !== null && { status: { status: r.status, at: Number(r.status_at) } }),
      ...(r.offered !== null && { offered: { version: r.offered, at: Number(r.offered_at) } }),
      ...(r.agent !== null && { agent: r.agent }),
    }));
  }

  /** Runs `write` and appends `rows` to the change log in one transaction; tells the feed and
   * gives the rows' highest number. */
  private async logged(
    rows: ChangeRow[],
    write?: (tx: SQL) => Promise<void>,
  ): Promise<number | undefined> {
    const rv = await transaction(this.pool, async (tx: SQL) => {
      await write?.(tx);
      if (this.copy) return undefined;
      return appendChanges(tx, rows, this.feed.origin, this.feed.now());
    });
    this.feed.committed(rv);
    return rv;
  }
}

/** Keeps `r` in the node's row of node_update_reports (only its own columns change). */
async function keepReport(tx: SQL, node: string, r: SharedReport): Promise<void> {
  const [cols, values] =
    "status" in r
      ? [
          ["status", "status_at"],
          [JSON.stringify(r.status), r.at],
        ]
      : "offered" in r
        ? [
            ["offered", "offered_at"],
            [r.offered, r.at],
          ]
        : [["agent"], [JSON.stringify(r.agent)]];
  const casts = cols.map((c, i) =>
    c === "status" || c === "agent" ? `$${i + 2}::text::json` : `$${i + 2}`,
  );
  const sets = cols.map((c) => `${c} = excluded.${c}`).join(", ");
  await tx.unsafe(
    `INSERT INTO node_update_reports (node, ${cols.join(", ")}) VALUES ($1, ${casts.join(", ")})
     ON CONFLICT (node) DO UPDATE SET ${sets}`,
    [node, ...values],
  );
}
