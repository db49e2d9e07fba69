// The hub's stores on PostgreSQL (docs/hub-replicas.md, "The store"): one pool of connections to
// the database, its schema migrated once (pg/migrations.ts), shared by the PostgreSQL
// implementation of each store. The hub's store closes the pool.
import type { Logger } from "../util/log.ts";
import { PostgresAuditStore } from "./audit-postgres.ts";
import type { SecretSealer } from "./deploy/sealing.ts";
import { openPostgresDeployStore } from "./deploy/store-postgres.ts";
import { ChangeFeed } from "./pg/changes.ts";
import { connectPostgres, POOL_SIZE, type PostgresConnectOptions } from "./pg/connect.ts";
import type { LeaderFence } from "./pg/leader.ts";
import type { PgPool } from "./pg/transaction.ts";
import { PostgresAgentRolloutStore } from "./rollouts/store-postgres.ts";
import { PostgresHubStore } from "./store-postgres.ts";
import type { HubStores } from "./stores-sqlite.ts";
import { PostgresUpdateStore } from "./updates/store-postgres.ts";

/**
 * The hub's stores on the database at `url` (postgres://USER@HOST:PORT/DB), its Secrets sealed
 * with `sealer`'s sealing key first; the singletons' writes checked with `leaderFence`; the change
 * log's rows and node claims dated by `o.now` (the hub's clock; default the system's). A
 * Secret that does not open closes the pool and throws
 * SealError: the hub does not start.
 */
export async function openPostgresStores(
  url: string,
  sealer: SecretSealer | undefined,
  log: Logger,
  o: PostgresConnectOptions & { copy?: boolean; now?: () => number } = {},
  leaderFence?: LeaderFence,
): Promise<HubStores & { pool: PgPool }> {
  const sql = await connectPostgres(url, o);
  const pool = { sql, size: o.max ?? POOL_SIZE, ...(leaderFence !== undefined && { leaderFence }) };
  const feed = new ChangeFeed(o.now);
  try {
    const deploy = await openPostgresDeployStore(pool, sealer, log, {
      feed,
      copy: o.copy === true,
    });
    const hub = new PostgresHubStore(pool, feed, o.copy === true);
    return {
      pool,
      hub,
      sessions: hub,
      beats: hub,
      deploy,
      updates: new PostgresUpdateStore(pool, feed, o.copy === true),
      rollouts: new PostgresAgentRolloutStore(pool, feed, o.copy === true),
      audit: new PostgresAuditStore(pool),
      follow: { pool, feed, textOf: (row) => deploy.textOf(row) },
    };
  } catch (err) {
    await pool.sql.close();
    throw err;
  }
}
