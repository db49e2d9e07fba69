// The agent rollouts (store.ts) in the hub's SQLite database: one row a rollout, its spec and
// record as JSON. A change reads and writes its row in one transaction (one writer: the hub).
import type { Database } from "bun:sqlite";
import type { AgentRollout } from "./spec.ts";
import type { AgentRolloutStore, RolloutChange } from "./store.ts";

const SCHEMA = `CREATE TABLE IF NOT EXISTS agent_rollouts (name TEXT PRIMARY KEY, spec TEXT NOT NULL, record TEXT NOT NULL, created INTEGER NOT NULL)`;

type Row = { name: string; spec: string; record: string; created: number };

const fromRow = (r: Row): AgentRollout => ({
  name: r.name,
  spec: JSON.parse(r.spec),
  record: JSON.parse(r.record),
  created: r.created,
});

export class SqliteAgentRolloutStore implements AgentRolloutStore {
  constructor(private readonly db: Database) {
    this.db.exec(SCHEMA);
  }

  async load(): Promise<AgentRollout[]> {
    const rows = this.db
      .query("SELECT name, spec, record, created FROM agent_rollouts ORDER BY name")
      .all() as Row[];
    return rows.map(fromRow);
  }

  async change(name: string, change: RolloutChange): Promise<{ stored: AgentRollout | undefined }> {
    return this.db.transaction(() => {
      const row = this.db
        .query("SELECT name, spec, record, created FROM agent_rollouts WHERE name = ?")
        .get(name) as Row | null;
      const stored = row === null ? undefined : fromRow(row);
      const next = change(stored);
      if (next === undefined) return { stored };
      if (next === null) {
        this.db.query("DELETE FROM agent_rollouts WHERE name = ?").run(name);
        return { stored: undefined };
      }
      this.db
        .query(
          "INSERT OR REPLACE INTO agent_rollouts (name, spec, record, created) VALUES (?, ?, ?, ?)",
        )
        .run(name, JSON.stringify(next.spec), JSON.stringify(next.record), next.created);
      return { stored: next };
    })();
  }
}
