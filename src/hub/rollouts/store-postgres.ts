// The agent rollouts (store.ts) in the hub's PostgreSQL database (migration 2's
// `agent_rollouts`): one row a rollout, its spec and record as json. Writes are an upsert or a
// delete, so they may be run again after their session ended.
import { type PgPool, transaction } from "../pg/transaction.ts";
import type { AgentRollout } from "./spec.ts";
import type { AgentRolloutStore } from "./store.ts";

export class PostgresAgentRolloutStore implements AgentRolloutStore {
  constructor(private readonly pool: PgPool) {}

  async load(): Promise<AgentRollout[]> {
    // By name in byte order, as SQLite orders text, whatever the database's collation.
    const rows = (await transaction(this.pool, (tx) =>
      tx.unsafe(`SELECT name, spec, record, created FROM agent_rollouts ORDER BY name COLLATE "C"`),
    )) as {
      name: string;
      spec: AgentRollout["spec"];
      record: AgentRollout["record"];
      created: string;
    }[];
    return rows.map((r) => ({
      name: r.name,
      spec: r.spec,
      record: r.record,
      created: Number(r.created),
    }));
  }

  async save(r: AgentRollout, byPass = false): Promise<void> {
    await transaction(this.pool, async (tx) => {
      if (byPass) await this.pool.leaderFence?.(tx);
      await tx.unsafe(
        `INSERT INTO agent_rollouts (name, spec, record, created)
         VALUES ($1, $2::text::json, $3::text::json, $4)
         ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, record = excluded.record,
           created = excluded.created`,
        [r.name, JSON.stringify(r.spec), JSON.stringify(r.record), r.created],
      );
    });
  }

  async delete(name: string): Promise<void> {
    await transaction(this.pool, (tx) =>
      tx.unsafe("DELETE FROM agent_rollouts WHERE name = $1", [name]),
    );
  }
}
