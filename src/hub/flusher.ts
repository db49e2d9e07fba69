// The hub's outbound acknowledgements: received agent messages are written to the store in
// batches (one transaction per `intervalMs`), and only then is each sender told with `ack` that
// everything up to its last seq is stored. A failed write sends no ack: agents resend.
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import type { Fleet } from "./fleet.ts";
import type { HubStore } from "./store.ts";

export interface FlusherDeps {
  fleet: Pick<Fleet, "markReceived" | "stored">;
  store: Pick<HubStore, "flush">;
  clock: Clock;
  log: Logger;
  intervalMs: number;
  /** Sends `ack` to the node's connection, if it has one. */
  ack(node: string, seq: number): void;
}

export class Flusher {
  private readonly dirty = new Set<string>();
  private cancel: (() => void) | undefined;

  constructor(private readonly deps: FlusherDeps) {}

  /** `node` sent messages to store and acknowledge: flush within the interval. */
  markDirty(node: string): void {
    this.dirty.add(node);
    this.cancel ??= this.deps.clock.setTimer(this.deps.intervalMs, () => this.flush());
  }

  /** Writes what is queued now and sends the acks (the flush loop's iteration). */
  flush(): void {
    this.cancel?.();
    this.cancel = undefined;
    const acks: [string, number][] = [];
    for (const name of this.dirty) acks.push([name, this.deps.fleet.markReceived(name)]);
    this.dirty.clear();
    try {
      this.deps.store.flush();
    } catch (err) {
      this.deps.log.error("hub store write failed; agents will resend", { error: err });
      return;
    }
    for (const [name, seq] of acks) {
      this.deps.fleet.stored(name, seq);
      this.deps.ack(name, seq);
    }
  }

  /** Stops the pending flush timer (the hub stops; call flush() after). */
  stop(): void {
    this.cancel?.();
    this.cancel = undefined;
  }
}
