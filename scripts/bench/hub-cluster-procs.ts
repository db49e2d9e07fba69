// What scripts/bench/hub-load-replicas.ts reads of the processes and of PostgreSQL: CPU time from
// /proc (a process, the PostgreSQL server with its backends, the whole machine) and the
// database's counters from pg_stat_database.
import { readdirSync, readFileSync } from "node:fs";
import { SQL } from "bun";

const TICKS_PER_S = 100;

/** utime + stime of `pid` in seconds (0 when it is gone). */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // After the name: state is field 3, utime 14 and stime 15 (1-based in proc(5)).
    return (Number(f[11]) + Number(f[12])) / TICKS_PER_S;
  } catch {
    return 0;
  }
}

/** The parent pid of `pid`, or -1. */
function ppid(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  } catch {
    return -1;
  }
}

/** CPU seconds of `root` and its children (a postmaster and its backends). */
export function treeCpuSeconds(root: number): number {
  let total = cpuSeconds(root);
  for (const e of readdirSync("/proc")) {
    const pid = Number(e);
    if (Number.isInteger(pid) && pid !== root && ppid(pid) === root) total += cpuSeconds(pid);
  }
  return total;
}

/** The machine's busy and total CPU seconds (all cores) from /proc/stat. */
export function machineCpu(): { busy: number; total: number } {
  const line = readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "";
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const total = v.reduce((a, b) => a + b, 0);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  return { busy: (total - idle) / TICKS_PER_S, total: total / TICKS_PER_S };
}

/** The postmaster's pid, from the first line of its data folder's postmaster.pid. */
export function postmasterPid(dataDir: string): number {
  return Number(readFileSync(`${dataDir}/postmaster.pid`, "utf8").split("\n")[0]);
}

export interface PgCounters {
  xactCommit: number;
  tupInserted: number;
  tupUpdated: number;
  tupDeleted: number;
  /** The server's WAL (pg_stat_wal, the whole server): bytes, syncs and their time in ms. */
  walBytes: number;
  walSyncs: number;
  walSyncMs: number;
}

/** Has the server time its WAL writes and syncs (pg_stat_wal's *_time). */
export async function timeWalIo(adminUrl: string): Promise<void> {
  const sql = new SQL(adminUrl, { max: 1 });
  try {
    await sql.unsafe("ALTER SYSTEM SET track_wal_io_timing = on");
    await sql.unsafe("SELECT pg_reload_conf()");
  } finally {
    await sql.close();
  }
}

/** The counters of the database at `url` (PostgreSQL's cumulative statistics: backends
 * publish theirs at most a second late while busy). */
export async function pgCounters(url: string): Promise<PgCounters> {
  const sql = new SQL(url, { max: 1 });
  try {
    const [row] = (await sql.unsafe(
      `SELECT xact_commit::float8 AS c, tup_inserted::float8 AS i, tup_updated::float8 AS u,
              tup_deleted::float8 AS d, w.wal_bytes::float8 AS wb, w.wal_sync::float8 AS ws,
              w.wal_sync_time AS wt
         FROM pg_stat_database, pg_stat_wal w WHERE datname = current_database()`,
    )) as { c: number; i: number; u: number; d: number; wb: number; ws: number; wt: number }[];
    return {
      xactCommit: row?.c ?? 0,
      tupInserted: row?.i ?? 0,
      tupUpdated: row?.u ?? 0,
      tupDeleted: row?.d ?? 0,
      walBytes: row?.wb ?? 0,
      walSyncs: row?.ws ?? 0,
      walSyncMs: row?.wt ?? 0,
    };
  } finally {
    await sql.close();
  }
}
