// The connection pool of the hub's PostgreSQL store: Bun's own SQL client, with the schema
// brought up to date (migrations.ts) before it is used.
import { SQL } from "bun";
import { migrate } from "./migrations.ts";

/** Connections in a pool, unless told. */
export const POOL_SIZE = 8;

export interface PostgresConnectOptions {
  /** Connections in the pool; default POOL_SIZE. */
  max?: number;
  /** Seconds to wait for a connection to be made before a query fails; default 10. */
  connectionTimeout?: number;
}

/** Connects to `url` (postgres://USER@HOST:PORT/DB) and migrates its schema. */
export async function connectPostgres(url: string, o: PostgresConnectOptions = {}): Promise<SQL> {
  const sql = new SQL(url, {
    max: o.max ?? POOL_SIZE,
    connectionTimeout: o.connectionTimeout ?? 10,
    idleTimeout: 60,
  });
  try {
    await migrate(sql);
    return sql;
  } catch (err) {
    await sql.close();
    throw err;
  }
}
