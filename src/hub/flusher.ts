// The hub's outbound acknowledgements: received agent messages are written to the store in
// batches (one transaction per `intervalMs`), and only then is each sender told with `ack` that
// everything up to its last seq is stored. A failed write (the data disk full) sends no ack:
// the messages stay in the agents' outboxes and in the store's queue, the hub's view in memory
// stays current, and the flush is tried again after a backoff (1 s doubling to 30 s) until it
// works, with no restart. Invariants: a node is acknowledged only up to what the store wrote;
// while writes fail, the failure is logged as an error once, then once a minute with what waits,
// and every retry that fails at debug level (with the count, so each attempt can be told).
// One flush writes at a time; a node marked dirty while one writes is acknowledged by the next.
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import type { Fleet } from "./fleet.ts";
import type { HubStore } from "./store.ts";

export interface FlusherDeps {
  fleet: Pick<Fleet, "markReceived" | "stored">;
  store: Pick<HubStore, "flush" | "pending">;
  clock: Clock;
  log: Logger;
  intervalMs: number;
  /** Sends `ack` to the node's connection, if it has one. */
  ack(node: string, seq: number): void;
}

/** How the store's writes go, for the API and the logs. */
export interface FlushHealth {
  /** Flushes that failed since the hub started. */
  failedFlushes: number;
  /** When the current run of failures began (undefined: the last flush worked). */
  failingSince?: number;
  /** The last failure's message. */
  lastError?: string;
}

const RETRY_FIRST_MS = 1000;
const RETRY_MAX_MS = 30_000;
const SAY_EVERY_MS = 60_000;

export class Flusher {
  private readonly dirty = new Set<string>();
  /** The flush writing now, if one is (flushOnce never rejects), and the one asked for since. */
  private writing: Promise<void> | undefined;
  private again: Promise<void> | undefined;
  private cancel: (() => void) | undefined;
  private readonly state: FlushHealth = { failedFlushes: 0 };
  /** The wait before the next retry while flushes fail. */
  private retryMs = RETRY_FIRST_MS;
  /** When the failure was last logged. */
  private saidAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly deps: FlusherDeps) {}

  /** `node` sent messages to store and acknowledge: flush within the interval. */
  markDirty(node: string): void {
    this.dirty.add(node);
    this.cancel ??= this.deps.clock.setTimer(this.deps.intervalMs, () => this.flush());
  }

  /** The store queued what no agent sent (a node went offline, its agent acknowledged a desired
   * state): flush within the interval, so that it does not wait for the next report (other hub
   * replicas see it only once stored). */
  soon(): void {
    this.cancel ??= this.deps.clock.setTimer(this.deps.intervalMs, () => this.flush());
  }

  /** Writes what is queued now and sends the acks (the flush loop's iteration). A flush asked
   * for while one writes runs once that one ended; the promise settles when this one did. */
  flush(): Promise<void> {
    this.cancel?.();
    this.cancel = undefined;
    if (this.writing !== undefined) {
      this.again ??= this.writing.then(() => {
        this.again = undefined;
        return this.flush();
      });
      return this.again;
    }
    const run = this.flushOnce();
    this.writing = run;
    void run.finally(() => {
      if (this.writing === run) this.writing = undefined;
    });
    return run;
  }

  private async flushOnce(): Promise<void> {
    const acks: [string, number][] = [];
    for (const name of this.dirty) acks.push([name, this.deps.fleet.markReceived(name)]);
    this.dirty.clear();
    try {
      await this.deps.store.flush();
    } catch (err) {
      for (const [name] of acks) this.dirty.add(name);
      this.failed(err);
      return;
    }
    this.recovered();
    for (const [name, seq] of acks) {
      this.deps.fleet.stored(name, seq);
      this.deps.ack(name, seq);
    }
  }

  health(): FlushHealth {
    return { ...this.state };
  }

  /** Stops the pending flush timer (the hub stops; await flush() after). */
  stop(): void {
    this.cancel?.();
    this.cancel = undefined;
  }

  /** Keeps the dirty nodes, says the failure (bounded), and tries again after the backoff. */
  private failed(err: unknown): void {
    const now = this.deps.clock.now();
    this.state.failedFlushes++;
    this.state.failingSince ??= now;
    this.state.lastError = err instanceof Error ? err.message : String(err);
    const said = {
      error: this.state.lastError,
      failedFlushes: this.state.failedFlushes,
      waitingWrites: this.deps.store.pending(),
      nodesWaitingForAck: this.dirty.size,
      retryInMs: this.retryMs,
    };
    const message = "hub store write failed; agents keep their unacknowledged messages";
    if (now - this.saidAt >= SAY_EVERY_MS) {
      this.saidAt = now;
      this.deps.log.error(message, said);
    } else this.deps.log.debug(message, said);
    this.cancel = this.deps.clock.setTimer(this.retryMs, () => this.flush());
    this.retryMs = Math.min(RETRY_MAX_MS, this.retryMs * 2);
  }

  private recovered(): void {
    if (this.state.failingSince === undefined) return;
    this.deps.log.info("hub store writes work again", {
      failedFlushes: this.state.failedFlushes,
      failingForMs: this.deps.clock.now() - this.state.failingSince,
    });
    delete this.state.failingSince;
    this.retryMs = RETRY_FIRST_MS;
    this.saidAt = Number.NEGATIVE_INFINITY;
  }
}
