// The agent rollouts (store.ts) in the hub's SQLite database: one row a rollout, its spec and
// record as JSON.
import type { Database } from "bun:sqlite";
import type { AgentRollout } from "./spec.ts";
import type { AgentRolloutStore } from "./store.ts";

const SCHEMA = `CREATE TABLE IF NOT EXISTS agent_rollouts (name TEXT PRIMARY KEY, spec TEXT NOT NULL, record TEXT NOT NULL, created INTEGER NOT NULL)`;

export class SqliteAgentRolloutStore implements AgentRolloutStore {
  constructor(private readonly db: Database) {
    this.db.exec(SCHEMA);
  }

  async load(): Promise<AgentRollout[]> {
    const rows = this.db
      .query("SELECT name, spec, record, created FROM agent_rollouts ORDER BY name")
      .all() as { name: string; spec: string; record: string; created: number }[];
    return rows.map((r) => ({
      name: r.name,
      spec: JSON.parse(r.spec),
      record: JSON.parse(r.record),
      created: r.created,
    }));
  }

  async save(r: AgentRollout): Promise<void> {
    this.db
      .query(
        "INSERT OR REPLACE INTO agent_rollouts (name, spec, record, created) VALUES (?, ?, ?, ?)",
      )
      .run(r.name, JSON.stringify(r.spec), JSON.stringify(r.record), r.created);
  }

  async delete(name: string): Promise<void> {
    this.db.query("DELETE FROM agent_rollouts WHERE name = ?").run(name);
  }
}
