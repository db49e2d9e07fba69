// The wanted release of each node (docs/hub-releases.md, "Updating one node"), in the hub's
// database beside its other tables: one row a node, written at once, read at start.
import type { Database } from "bun:sqlite";

/** The release the operator wants node `node` to run, and when it was set (ms). */
export interface WantedRelease {
  node: string;
  version: string;
  setAt: number;
}

const SCHEMA = `CREATE TABLE IF NOT EXISTS node_updates (node TEXT PRIMARY KEY, version TEXT NOT NULL, set_at INTEGER NOT NULL)`;

export class UpdateStore {
  constructor(private readonly db: Database) {
    this.db.exec(SCHEMA);
  }

  load(): WantedRelease[] {
    const rows = this.db.query("SELECT node, version, set_at FROM node_updates").all() as {
      node: string;
      version: string;
      set_at: number;
    }[];
    return rows.map((r) => ({ node: r.node, version: r.version, setAt: r.set_at }));
  }

  save(w: WantedRelease): void {
    this.db
      .query("INSERT OR REPLACE INTO node_updates (node, version, set_at) VALUES (?, ?, ?)")
      .run(w.node, w.version, w.setAt);
  }

  delete(node: string): void {
    this.db.query("DELETE FROM node_updates WHERE node = ?").run(node);
  }
}
