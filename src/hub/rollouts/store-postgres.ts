// The agent rollouts (store.ts) in the hub's PostgreSQL database (migration 2's
// `agent_rollouts`): one row a rollout, its spec and record as json. A change holds the row
// (SELECT … FOR UPDATE; a rollout not yet stored: the transaction's advisory lock on its name)
// while it reads and writes it, and appends its row to the change log in the same transaction.
// A transaction run again after its session ended reads what the first one left: a change is
// applied to what is stored, whichever run committed.
import type { SQL } from "bun";
import { appendChanges, ChangeFeed } from "../pg/changes.ts";
import { ROLLOUT_LOCK_CLASS } from "../pg/locks.ts";
import { type PgPool, transaction } from "../pg/transaction.ts";
import type { AgentRollout } from "./spec.ts";
import { type AgentRolloutStore, ROLLOUT_KIND, type RolloutChange, rolloutText } from "./store.ts";

type Row = {
  name: string;
  spec: AgentRollout["spec"];
  record: AgentRollout["record"];
  created: string;
};

const fromRow = (r: Row): AgentRollout => ({
  name: r.name,
  spec: r.spec,
  record: r.record,
  created: Number(r.created),
});

export class PostgresAgentRolloutStore implements AgentRolloutStore {
  constructor(
    private readonly pool: PgPool,
    private readonly feed = new ChangeFeed(),
    private readonly copy = false,
  ) {}

  async load(): Promise<AgentRollout[]> {
    // By name in byte order, as SQLite orders text, whatever the database's collation.
    const rows = (await transaction(this.pool, (tx) =>
      tx.unsafe(`SELECT name, spec, record, created FROM agent_rollouts ORDER BY name COLLATE "C"`),
    )) as Row[];
    return rows.map(fromRow);
  }

  async change(
    name: string,
    change: RolloutChange,
    byPass = false,
  ): Promise<{ stored: AgentRollout | undefined; rv?: number }> {
    const out = await transaction(this.pool, async (tx) => {
      if (byPass) await this.pool.leaderFence?.(tx);
      // Two first writes of one name wait for each other here (no row to lock yet).
      await tx.unsafe(`SELECT pg_advisory_xact_lock(${ROLLOUT_LOCK_CLASS}, hashtext($1))`, [name]);
      const rows = (await tx.unsafe(
        "SELECT name, spec, record, created FROM agent_rollouts WHERE name = $1 FOR UPDATE",
        [name],
      )) as Row[];
      const stored = rows[0] === undefined ? undefined : fromRow(rows[0]);
      const next = change(stored);
      if (next === undefined) return { stored };
      await this.write(tx, name, next);
      const row = {
        kind: ROLLOUT_KIND,
        key: name,
        deleted: next === null,
        object: next === null ? null : rolloutText(next),
      };
      const rv = this.copy
        ? undefined
        : await appendChanges(tx, [row], this.feed.origin, this.feed.now());
      return { stored: next ?? undefined, ...(rv !== undefined && { rv }) };
    });
    this.feed.committed(out.rv);
    return out;
  }

  private async write(tx: SQL, name: string, next: AgentRollout | null): Promise<void> {
    if (next === null) {
      await tx.unsafe("DELETE FROM agent_rollouts WHERE name = $1", [name]);
      return;
    }
    await tx.unsafe(
      `INSERT INTO agent_rollouts (name, spec, record, created)
       VALUES ($1, $2::text::json, $3::text::json, $4)
       ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, record = excluded.record,
         created = excluded.created`,
      [name, JSON.stringify(next.spec), JSON.stringify(next.record), next.created],
    );
  }
}
