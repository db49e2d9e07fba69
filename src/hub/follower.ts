// The follower of the shared change log (hub replicas, docs/hub-replicas.md "The store"): after a
// commit of its own the replica publishes `changes {rv, origin}` on the bus and pokes itself; on
// that poke from another replica (its own echo is dropped), on the bus's gap (messages may have
// been lost), and every `pollMs` without either, it reads the log past what it applied, once
// however many pokes came meanwhile and at most once every `readGapMs` (so reads are capped
// however often replicas commit), and applies the rows in order. A read that fails is tried
// again by the next poke or poll. A replica that finds the log trimmed past what it read (it was
// held up longer than the retention) loads its view again from the store and follows on from the
// rv of what it loaded. It also trims the log every `trimEveryMs` and says the trim's floor.
// Invariants: rows are applied once each, in rv order; `applied` only grows (a reload gives at
// least the floor, past every row read before).
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import type { Bus } from "./bus.ts";
import type { ChangeFeed, LoggedChange } from "./pg/changes.ts";

export interface FollowerDeps {
  /** The rows past `after`, oldest first (at most `limit`), and the trim's floor. */
  read(after: number): Promise<{ rows: LoggedChange[]; floor: number }>;
  /** Applies rows in order (never throws: a row that cannot be applied is logged and passed). */
  apply(rows: LoggedChange[]): void;
  /** The trim's floor: the highest rv no longer in the log. */
  trimmed(floor: number): void;
  /** Loads the view again from the store (what the replica loads at its start), in place of the
   * rows it can no longer read; gives the log's rv as of what was loaded. */
  reload(): Promise<number>;
  /** Trims the log; gives the floor. */
  trim(): Promise<number>;
  bus: Bus;
  feed: Pick<ChangeFeed, "onCommitted" | "origin">;
  clock: Clock;
  log: Logger;
  pollMs: number;
  /** The least time from the start of one read to the start of the next. */
  readGapMs: number;
  trimEveryMs: number;
  /** How many rows one read gives at most (a read of that many is followed by another). */
  limit: number;
}

export class ChangeFollower {
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  /** Ends the wait for the read gap at once (stop()). */
  private endGap: (() => void) | undefined;
  /** When the last read started (monotonic), -Infinity before the first. */
  private lastRead = Number.NEGATIVE_INFINITY;
  private readonly stops: (() => void)[] = [];

  /** `applied`: the highest rv of what the replica loaded. */
  constructor(
    private readonly deps: FollowerDeps,
    private applied: number,
  ) {}

  /** The highest rv applied. */
  get rv(): number {
    return this.applied;
  }

  /** Starts following: pokes, gaps, the poll and the trim; publishes its own commits. */
  start(): void {
    const d = this.deps;
    this.stops.push(
      d.feed.onCommitted((rv) => {
        d.bus.publish({ type: "changes", rv, origin: d.feed.origin });
        this.poke();
      }),
      d.bus.subscribe("changes", (m) => {
        if (m.origin !== d.feed.origin && m.rv > this.applied) this.poke();
      }),
      d.bus.onGap(() => this.poke()),
    );
    this.every(d.pollMs, () => this.poke());
    this.every(d.trimEveryMs, () => this.trimOnce());
  }

  stop(): void {
    this.stopped = true;
    this.endGap?.();
    for (const s of this.stops.splice(0)) s();
  }

  /** Reads and applies what is new, soon: once for every poke that comes while one reads or
   * waits for the read gap. */
  poke(): Promise<void> {
    if (this.running !== undefined) {
      this.again = true;
      return this.running;
    }
    const run = (async () => {
      do {
        const wait = this.lastRead + this.deps.readGapMs - this.deps.clock.monotonic();
        if (wait > 0) await this.gap(wait);
        if (this.stopped) return;
        this.again = false;
        this.lastRead = this.deps.clock.monotonic();
        await this.catchUp();
      } while (this.again);
    })();
    this.running = run;
    void run.finally(() => {
      this.running = undefined;
    });
    return run;
  }

  /** One catch-up: reads past `applied` until a read gives less than the limit (the iteration).
   * Never rejects: a failed read is logged and tried again by the next poke. */
  async catchUp(): Promise<void> {
    try {
      for (;;) {
        const { rows, floor } = await this.deps.read(this.applied);
        this.deps.trimmed(floor);
        if (floor > this.applied) {
          // Rows this replica never read are gone: its view would keep a hole.
          this.deps.log.warn(
            "the change log was trimmed past what this replica read; loading its view again from the store",
            { applied: this.applied, floor },
          );
          this.applied = await this.deps.reload();
          this.deps.log.info("the view was loaded again from the store", { rv: this.applied });
          continue;
        }
        const next = rows.filter((r) => r.rv > this.applied);
        if (next.length > 0) {
          this.deps.apply(next);
          this.applied = next[next.length - 1]?.rv ?? this.applied;
        }
        if (rows.length < this.deps.limit) return;
      }
    } catch (err) {
      this.deps.log.warn("reading the change log failed; tried again at the next poke or poll", {
        error: err instanceof Error ? err.message : String(err),
      });
    }
  }

  /** Waits `wait` ms (the rest of the read gap), or until stop(). */
  private gap(wait: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const cancel = this.deps.clock.setTimer(wait, () => {
        this.endGap = undefined;
        resolve();
      });
      this.endGap = () => {
        cancel();
        resolve();
      };
    });
  }

  private async trimOnce(): Promise<void> {
    try {
      this.deps.trimmed(await this.deps.trim());
    } catch (err) {
      this.deps.log.warn("trimming the change log failed", {
        error: err instanceof Error ? err.message : String(err),
      });
    }
  }

  private every(ms: number, fn: () => unknown): void {
    let cancel: (() => void) | undefined;
    const loop = () => {
      cancel = this.deps.clock.setTimer(ms, () => {
        void fn();
        loop();
      });
    };
    loop();
    this.stops.push(() => cancel?.());
  }
}
