// The advisory lock keys of the hub's PostgreSQL database, in one place so that no two uses share
// one (docs/hub-replicas.md). Each is an int8 literal, put into SQL text as is.

/** Held (pg_advisory_lock) by the process running the schema's migrations. */
export const MIGRATE_LOCK = "7380385375772737537"; // 0x666c_6565_746c_0001 ("fleetl", 1)

/** Held (pg_advisory_xact_lock) by a transaction from the moment it draws resourceVersions for
 * its rows of `changes` until it commits, so numbers are committed in the order they are drawn,
 * across replicas (changes.ts). */
export const CHANGES_LOCK = "7380385375772737538"; // ("fleetl", 2)
