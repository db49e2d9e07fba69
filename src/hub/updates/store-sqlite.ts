// The wanted releases of nodes (store.ts) in the hub's SQLite database.
import type { Database } from "bun:sqlite";
import type { UpdateStore, WantedChange, WantedRelease } from "./store.ts";

const SCHEMA = `CREATE TABLE IF NOT EXISTS node_updates (node TEXT PRIMARY KEY, version TEXT NOT NULL, set_at INTEGER NOT NULL)`;

export class SqliteUpdateStore implements UpdateStore {
  constructor(private readonly db: Database) {
    this.db.exec(SCHEMA);
  }

  async load(): Promise<WantedRelease[]> {
    const rows = this.db.query("SELECT node, version, set_at FROM node_updates").all() as {
      node: string;
      version: string;
      set_at: number;
    }[];
    return rows.map((r) => ({ node: r.node, version: r.version, setAt: r.set_at }));
  }

  async write(changes: readonly WantedChange[]): Promise<undefined> {
    if (changes.length === 0) return undefined;
    const put = this.db.query(
      "INSERT OR REPLACE INTO node_updates (node, version, set_at) VALUES (?, ?, ?)",
    );
    const del = this.db.query("DELETE FROM node_updates WHERE node = ?");
    this.db.transaction(() => {
      for (const c of changes) {
        if (c.version === null) del.run(c.node);
        else put.run(c.node, c.version, c.setAt);
      }
    })();
    return undefined;
  }
}
