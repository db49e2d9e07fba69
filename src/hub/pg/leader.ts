// The election of the replica that runs the hub's singletons (docs/hub-replicas.md,
// "Singletons"): it holds pg_try_advisory_lock(LEADER_LOCK) on a session of its own (a pool of
// one connection, reserved), and the others try every `tryEveryMs`.
//
// Invariants: `pid` is set only while this elector's session was last seen holding the lock;
// a failed or late check ends the session (so the lock is freed if it was still held) before the
// next try. The session's `idle_session_timeout` makes the server end it, and free the lock,
// when its holder stops asking (a process frozen, a network lost): the leader checks every
// `checkEveryMs`, well within it; TCP keepalives and `tcp_user_timeout` bound a silent loss.
import { SQL } from "bun";
import type { Clock } from "../../util/clock.ts";
import { sleepQuietly } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { type Leadership, NotLeaderError } from "../leader.ts";
import { advisoryLockRow, LEADER_LOCK } from "./locks.ts";

export interface LeaderElectorOptions {
  /** postgres://USER@HOST:PORT/DB */
  url: string;
  clock: Clock;
  log: Logger;
  /** Time between tries of a replica that does not lead (default 2 s). */
  tryEveryMs?: number;
  /** Time between the leader's checks that its session still holds the lock (default 2 s). */
  checkEveryMs?: number;
  /** A try or check not answered within this steps down or fails (default 4 s). */
  answerWithinMs?: number;
  /** The server ends the session after this long without a query (default 8 s). */
  sessionIdleMs?: number;
  /** The lock's key (default LEADER_LOCK). */
  key?: string;
}

/** A transaction's check that this replica still leads (throws NotLeaderError otherwise). */
export type LeaderFence = (tx: SQL) => Promise<void>;

export class PostgresLeaderElector implements Leadership {
  private sql: SQL | undefined;
  private session: SQL | undefined;
  /** The backend pid of the session holding the lock, while leading. */
  private pid: number | undefined;
  /** How many times this elector took the lead. */
  private terms = 0;
  private readonly listeners: ((leading: boolean) => void)[] = [];
  private readonly lock: { classid: number; objid: number };
  private readonly key: string;

  constructor(private readonly o: LeaderElectorOptions) {
    this.key = o.key ?? LEADER_LOCK;
    if (!/^-?\d+$/.test(this.key)) throw new Error(`invalid advisory lock key ${this.key}`);
    this.lock = advisoryLockRow(this.key);
  }

  leading(): boolean {
    return this.pid !== undefined;
  }

  term(): number | undefined {
    return this.pid === undefined ? undefined : this.terms;
  }

  onChange(fn: (leading: boolean) => void): void {
    this.listeners.push(fn);
  }

  /** Tries for the lock (not leading) or checks it is still held (leading): the loop's
   * iteration. Never throws. */
  async step(): Promise<void> {
    try {
      if (this.pid === undefined) await this.tryLock();
      else await this.check();
    } catch (error) {
      if (this.pid !== undefined)
        this.o.log.warn("leader lock lost: stepping down", { error: String(error) });
      this.dropSession();
    }
  }

  /** Runs step() until `signal`, then ends the session (freeing the lock). */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await this.step();
      const wait = this.pid === undefined ? (this.o.tryEveryMs ?? 2000) : this.checkEveryMs();
      await sleepQuietly(this.o.clock, wait, signal);
    }
    this.close();
  }

  /** Ends the session, freeing the lock if held, and steps down. */
  close(): void {
    this.dropSession();
  }

  /** Throws NotLeaderError in `tx` (any connection) unless this elector's session holds the
   * lock now; then it steps down. */
  readonly fence: LeaderFence = async (tx) => {
    const pid = this.pid;
    const held =
      pid !== undefined &&
      (
        await tx.unsafe(
          `SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = $1
             AND classid = $2 AND objid = $3 AND objsubid = 1`,
          [pid, this.lock.classid, this.lock.objid],
        )
      ).length > 0;
    if (held) return;
    if (this.pid === pid) this.dropSession();
    throw new NotLeaderError("write the singleton's state");
  };

  private checkEveryMs(): number {
    return this.o.checkEveryMs ?? 2000;
  }

  private async tryLock(): Promise<void> {
    const session = await this.openSession();
    const rows = await this.answer(
      session.unsafe(`SELECT pg_try_advisory_lock(${this.key}) AS got, pg_backend_pid() AS pid`),
    );
    const row = (rows as { got: boolean; pid: number }[])[0];
    if (row?.got !== true) return;
    this.pid = row.pid;
    this.terms++;
    this.o.log.info("leading: this replica runs the hub's singletons", { pid: row.pid });
    this.tell(true);
  }

  private async check(): Promise<void> {
    const session = this.session;
    if (session === undefined) throw new Error("no session");
    const rows = await this.answer(
      session.unsafe(
        `SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
           AND pid = pg_backend_pid() AND classid = $1 AND objid = $2 AND objsubid = 1`,
        [this.lock.classid, this.lock.objid],
      ),
    );
    if (rows.length === 0) throw new Error("the session no longer holds the leader lock");
  }

  /** The elector's session, opened with its timeouts when there is none. */
  private async openSession(): Promise<SQL> {
    if (this.session !== undefined) return this.session;
    const sql = new SQL(this.o.url, { max: 1, connectionTimeout: 5, idleTimeout: 0 });
    this.sql = sql;
    const session = await this.answer(sql.reserve());
    this.session = session;
    const idle = this.o.sessionIdleMs ?? 8000;
    await this.answer(
      session.unsafe(
        `SELECT set_config('idle_session_timeout', '${idle}', false),
                set_config('tcp_keepalives_idle', '5', false),
                set_config('tcp_keepalives_interval', '2', false),
                set_config('tcp_keepalives_count', '3', false),
                set_config('tcp_user_timeout', '${idle}', false)`,
      ),
    );
    return session;
  }

  /** `p`, or a rejection when it does not answer within answerWithinMs. */
  private answer<T>(p: Promise<T>): Promise<T> {
    const ms = this.o.answerWithinMs ?? 4000;
    return new Promise<T>((resolve, reject) => {
      const cancel = this.o.clock.setTimer(ms, () =>
        reject(new Error(`PostgreSQL did not answer within ${ms} ms`)),
      );
      p.then(
        (v) => {
          cancel();
          resolve(v);
        },
        (e) => {
          cancel();
          reject(e);
        },
      );
    });
  }

  /** Ends the session (the server frees the lock with it) and steps down if leading. */
  private dropSession(): void {
    const sql = this.sql;
    this.sql = undefined;
    this.session = undefined;
    if (sql !== undefined) void sql.close({ timeout: 0 }).catch(() => {});
    if (this.pid === undefined) return;
    this.pid = undefined;
    this.tell(false);
  }

  private tell(leading: boolean): void {
    for (const fn of this.listeners) {
      try {
        fn(leading);
      } catch (error) {
        this.o.log.error("leadership listener failed", { error: String(error) });
      }
    }
  }
}
