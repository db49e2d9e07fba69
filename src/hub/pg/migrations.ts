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
  {
    version: 2,
    name: "deploy objects, DaemonSet revisions, rollouts, assignments, node updates, agent rollouts, audit",
    statements: [
      // A Secret's body is sealed text (deploy/sealing.ts), not JSON: text for every kind (an
      // object's JSON text escapes NUL, which a text column refuses). A revision's change cause
      // is a json string, since it may hold NUL.
      `CREATE TABLE objects (kind text NOT NULL, namespace text NOT NULL, name text NOT NULL,
        body text NOT NULL, PRIMARY KEY (kind, namespace, name))`,
      `CREATE TABLE revisions (ds_uid text NOT NULL, hash text NOT NULL, revision integer NOT NULL,
        template json NOT NULL, change_cause json, created_at bigint NOT NULL,
        PRIMARY KEY (ds_uid, hash))`,
      "CREATE TABLE rollouts (ds_uid text PRIMARY KEY, record json NOT NULL)",
      `CREATE TABLE assignments (ds_uid text NOT NULL, node text NOT NULL, hash text NOT NULL,
        assigned_at bigint NOT NULL, PRIMARY KEY (ds_uid, node))`,
      `CREATE TABLE node_updates (node text PRIMARY KEY, version text NOT NULL,
        set_at bigint NOT NULL)`,
      `CREATE TABLE agent_rollouts (name text PRIMARY KEY, spec json NOT NULL,
        record json NOT NULL, created bigint NOT NULL)`,
      // `entry_key`: the key an append is written under, so that an append tried again after
      // its session ended stores one record. `node_key`: the record's device as a JSON string,
      // for the log of one device (a refused request's device may hold NUL).
      `CREATE TABLE audit (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        entry_key uuid NOT NULL UNIQUE, node_key text NOT NULL, record json NOT NULL)`,
      "CREATE INDEX audit_node ON audit (node_key, id)",
    ],
  },
  {
    version: 3,
    name: "what every replica shares: the hub's CA, serving certificate and operator token",
    statements: [
      // One row, made by the first replica (replica-identity.ts); the keys and the token are
      // sealed with the secrets key (deploy/sealing.ts).
      `CREATE TABLE hub_identity (id integer PRIMARY KEY CHECK (id = 1), ca_cert text NOT NULL,
        ca_key text NOT NULL, serving_cert text NOT NULL, serving_key text NOT NULL,
        operator_token text NOT NULL, created_at bigint NOT NULL)`,
    ],
  },
  {
    version: 4,
    name: "the change log replicas follow, and the resourceVersion sequence",
    statements: [
      // One sequence numbers every change of watchable state (changes.ts); it starts past the
      // deploy store's resourceVersion counter, so objects stored before keep lower numbers.
      "CREATE SEQUENCE changes_rv AS bigint",
      `SELECT setval('changes_rv', greatest(1, coalesce(
        (SELECT value::bigint FROM meta WHERE key = 'resourceVersion'), 0) + 1), false)`,
      // `object`: the object's JSON text (a Secret's sealed body), or null for a tombstone that
      // watchers are not told of. `origin`: the writing process, so it can tell its own rows.
      `CREATE TABLE changes (rv bigint PRIMARY KEY, kind text NOT NULL, key text NOT NULL,
        deleted boolean NOT NULL, object text, origin text NOT NULL, at bigint NOT NULL)`,
      "CREATE INDEX changes_at ON changes (at)",
    ],
  },
  {
    version: 5,
    name: "who holds a node: node_sessions (node, replica, epoch)",
    statements: [
      // One row per node that a replica welcomed (pg/node-sessions.ts): the replica that holds
      // it and the epoch it took it with; a replica's writes of the node's reports are dropped
      // once the epoch moved on.
      `CREATE TABLE node_sessions (node text PRIMARY KEY, replica text NOT NULL,
        epoch bigint NOT NULL, taken_at bigint NOT NULL)`,
    ],
  },
  {
    version: 6,
    name: "agent releases: a row a release, its gzip in chunks",
    statements: [
      // A release is visible once its row is committed, with its chunks, in one transaction
      // (releases/store-postgres.ts); compressed_sha256 checks the chunks when they are read.
      `CREATE TABLE releases (version text NOT NULL, arch text NOT NULL, manifest text NOT NULL,
        sha256 text NOT NULL, compressed_size bigint NOT NULL, compressed_sha256 text NOT NULL,
        pushed_at bigint NOT NULL, PRIMARY KEY (version, arch))`,
      `CREATE TABLE release_chunks (version text NOT NULL, arch text NOT NULL, idx integer NOT NULL,
        data bytea NOT NULL, PRIMARY KEY (version, arch, idx),
        FOREIGN KEY (version, arch) REFERENCES releases ON DELETE CASCADE)`,
    ],
  },
  {
    version: 7,
    name: "replicas prove they are alive: replicas (origin, beat), node_sessions.origin",
    statements: [
      // A row a replica process (its change feed's random origin), its beat counted up every
      // few seconds (pg/replicas.ts); the leader releases the nodes of a replica whose beat
      // stopped. Sessions taken before this migration name no process (''): released the same
      // way once their threshold passed; NULL: released, held by none.
      `CREATE TABLE replicas (origin text PRIMARY KEY, replica text NOT NULL,
        beat bigint NOT NULL, seen_at bigint NOT NULL)`,
      "ALTER TABLE node_sessions ADD COLUMN origin text DEFAULT ''",
      "ALTER TABLE node_sessions ALTER COLUMN origin DROP DEFAULT",
      "CREATE INDEX node_sessions_origin ON node_sessions (origin)",
    ],
  },
  {
    version: 8,
    name: "what the holder of an agent heard of its update: node_update_reports",
    statements: [
      // A row a node (updates/shared.ts): its agent's last update.status and when it came, the
      // version first offered it and when, its hello (version, takes updates), each written by
      // the replica holding the agent, so a replica that starts later (and may lead) has them.
      `CREATE TABLE node_update_reports (node text PRIMARY KEY, status json, status_at bigint,
        offered text, offered_at bigint, agent json)`,
    ],
  },
  {
    version: 9,
    name: "each DaemonSet's status as the leader shows it: ds_statuses",
    statements: [
      // A row a DaemonSet (deploy/shared.ts): its status, the rollout's phase, since when, and
      // the record, written by the leader's passes, so a replica that does not lead serves them.
      "CREATE TABLE ds_statuses (ds_uid text PRIMARY KEY, body json NOT NULL)",
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
