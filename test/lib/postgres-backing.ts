// A backing (store-backing.ts) on a PostgreSQL database of its own in a throwaway cluster
// (scripts/lib/postgres.ts): each open() connects a new pool to it and migrates, as a restarted
// hub would, and makes the store on that pool with `make`; remove() closes the pools and drops
// the database.
import type { PostgresCluster } from "../../scripts/lib/postgres.ts";
import { connectPostgres } from "../../src/hub/pg/connect.ts";
import type { PgPool } from "../../src/hub/pg/transaction.ts";
import type { Backing } from "./store-backing.ts";

/** Connections in each pool: few, as a suite opens many. */
const POOL = 2;

export async function postgresBacking<S>(
  cluster: PostgresCluster,
  make: (pool: PgPool) => S | Promise<S>,
): Promise<Backing<S>> {
  const url = await cluster.createDatabase();
  const pools: PgPool[] = [];
  return {
    open: async () => {
      const pool = {
        sql: await connectPostgres(url, { max: POOL, connectionTimeout: 2 }),
        size: POOL,
      };
      pools.push(pool);
      return make(pool);
    },
    remove: async () => {
      for (const p of pools) await p.sql.close();
      await cluster.dropDatabase(url);
    },
  };
}
