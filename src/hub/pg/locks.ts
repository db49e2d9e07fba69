// The advisory lock keys of the hub's PostgreSQL database, in one place so that no two uses share
// one (docs/hub-replicas.md). Each is an int8 literal, put into SQL text as is.

/** Held (pg_advisory_lock) by the process running the schema's migrations. */
export const MIGRATE_LOCK = "7380385375772737537"; // 0x666c_6565_746c_0001 ("fleetl", 1)

/** Held (pg_advisory_xact_lock) by a transaction from the moment it draws resourceVersions for
 * its rows of `changes` until it commits, so numbers are committed in the order they are drawn,
 * across replicas (changes.ts). */
export const CHANGES_LOCK = "7380385375772737538"; // ("fleetl", 2)

/** Held (pg_try_advisory_lock, on a session of its own) by the replica that runs the hub's
 * singletons (leader.ts). */
export const LEADER_LOCK = "7380385375772737539"; // 0x666c_6565_746c_0003 ("fleetl", 3)

/** How pg_locks shows a session-level advisory lock on the int8 `key`: its high 32 bits as
 * classid, its low 32 bits as objid, objsubid 1. */
export function advisoryLockRow(key: string): { classid: number; objid: number } {
  const k = BigInt.asUintN(64, BigInt(key));
  return { classid: Number(k >> 32n), objid: Number(k & 0xffff_ffffn) };
}

/** With a name's hashtext, held (pg_advisory_xact_lock(int4, int4)) by a transaction writing
 * the agent rollout of that name (rollouts/store-postgres.ts): two first writes of a name, which
 * have no row to lock yet, wait for each other. */
export const ROLLOUT_LOCK_CLASS = "1718379877"; // 0x666c_6565 ("flee")
