// The PostgreSQL schema of the hub's store, as numbered migrations (docs/hub-replicas.md, "Schema
// migrations"). A migration is never edited once released: a change of schema is a new one at the
// end. The process that takes pg_advisory_lock(MIGRATE_LOCK) first runs those missing from
// `schema_migrations`, each in a transaction of its own; the others wait on the lock and then
// find nothing to do. Objects are `json` (their text as written, so a string holding any
// character, NUL among them, comes back as it went in); times are ms since the epoch, in bigint.
import type { SQL } from "bun";
import { MIGRATE_LOCK } from "./locks.ts";

interface Migration {
  version: number;
  name: string;
  statements: string[];
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "fleet tables: meta, join tokens, nodes, pods, events",
    statements: [
      "CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL)",
      `CREATE TABLE join_tokens (id text PRIMARY KEY, hash text NOT NULL UNIQUE,
        expires_at bigint NOT NULL, labels json NOT NULL, revoked boolean NOT NULL,
        created_at bigint NOT NULL, max_uses integer, used integer NOT NULL DEFAULT 0)`,
      "CREATE TABLE nodes (name text PRIMARY KEY, progress json NOT NULL, node json)",
      `CREATE TABLE pods (node text NOT NULL, uid text NOT NULL, pod json NOT NULL,
        PRIMARY KEY (node, uid))`,
      `CREATE TABLE events (node text NOT NULL, name text NOT NULL, event json NOT NULL,
        PRIMARY KEY (node, name))`,
    ],
  },
];

/** Runs the migrations missing from the database under the migration lock; gives the versions
 * this call applied (none when another process had applied them). */
export async function migrate(sql: SQL, migrations = MIGRATIONS): Promise<number[]> {
  const conn = await sql.reserve();
  try {
    await conn.unsafe(`SELECT pg_advisory_lock(${MIGRATE_LOCK})`);
    try {
      await conn.unsafe(`CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY,
        name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
      const rows = (await conn.unsafe("SELECT version FROM schema_migrations")) as {
        version: number;
      }[];
      const done = new Set(rows.map((r) => r.version));
      const applied: number[] = [];
      for (const m of migrations) {
        if (done.has(m.version)) continue;
        await conn.begin(async (tx) => {
          for (const s of m.statements) await tx.unsafe(s);
          await tx.unsafe("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", [
            m.version,
            m.name,
          ]);
        });
        applied.push(m.version);
      }
      return applied;
    } finally {
      // A connection that failed holds no lock any more: its session ended.
      await conn.unsafe(`SELECT pg_advisory_unlock(${MIGRATE_LOCK})`).catch(() => {});
    }
  } finally {
    conn.release();
  }
}
