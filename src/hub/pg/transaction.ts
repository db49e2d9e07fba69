// Transactions on the hub's PostgreSQL pool, tried again on another connection when the one they
// ran on was found ended by the server (errors.ts, sessionLost). Every write the hub's
// PostgreSQL stores make is idempotent (rows set to a value, deletes, an audit record inserted
// under a key of its own), so a transaction whose commit may or may not have landed is safe to
// run again.
import type { SQL } from "bun";
import { sessionLost } from "./errors.ts";

/** A connection pool and its size: the most connections a restarted server can have ended. */
export interface PgPool {
  sql: SQL;
  size: number;
  /** Checks, in a transaction writing what only the leading replica writes (its singletons'
   * passes), that this replica still leads (leader.ts); absent: not checked (one writer). */
  leaderFence?: (tx: SQL) => Promise<void>;
}

/** Runs `fn` in a transaction (`mode`: BEGIN's options), again on another connection while the
 * one it ran on was found ended, up to the pool's size. */
export async function transaction<T>(
  pool: PgPool,
  fn: (tx: SQL) => Promise<T>,
  mode = "",
): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await pool.sql.begin(mode, fn);
    } catch (err) {
      if (attempt >= pool.size || !sessionLost(err)) throw err;
    }
  }
}
