// The agent rollouts in the hub's database (docs/hub-releases.md, "Storage"): one row a rollout,
// its spec and record as JSON, written before the API answers and after each pass that changed
// it, read when the hub starts.
import type { Database } from "bun:sqlite";
import type { AgentRollout } from "./spec.ts";

const SCHEMA = `CREATE TABLE IF NOT EXISTS agent_rollouts (name TEXT PRIMARY KEY, spec TEXT NOT NULL, record TEXT NOT NULL, created INTEGER NOT NULL)`;

export class AgentRolloutStore {
  constructor(private readonly db: Database) {
    this.db.exec(SCHEMA);
  }

  load(): AgentRollout[] {
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

  save(r: AgentRollout): void {
    this.db
      .query(
        "INSERT OR REPLACE INTO agent_rollouts (name, spec, record, created) VALUES (?, ?, ?, ?)",
      )
      .run(r.name, JSON.stringify(r.spec), JSON.stringify(r.record), r.created);
  }

  delete(name: string): void {
    this.db.query("DELETE FROM agent_rollouts WHERE name = ?").run(name);
  }
}
