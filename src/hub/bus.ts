// The hub's bus: "something changed, tell whoever cares". One hub process delivers in-process
// (createLocalBus); hub replicas deliver through NATS (createNatsBus in bus-nats.ts) behind the
// same interface (docs/hub-replicas.md). The bus only says that something happened: the store
// holds the truth, so a subscriber that was told messages may have been missed (onGap) reads
// what it follows again from the store.

/** What one replica tells the others (and itself). Subjects: bus-codec.ts. */
export type BusMessage =
  /** The node's desired state has a new generation: its holder sends it if connected. */
  | { type: "desired"; node: string }
  /** The change log has grown to `rv`: read `changes` past what was applied. `origin`: the
   * writing process's ChangeFeed origin (its own echo is not read for). */
  | { type: "changes"; rv: number; origin?: string }
  /** `replica` welcomed the node's agent with session `epoch`: an older holder lets it go. */
  | { type: "taken"; node: string; replica: string; epoch: number };

type BusMessageType = BusMessage["type"];
/** The message of type `T`. */
type BusMessageOf<T extends BusMessageType> = Extract<BusMessage, { type: T }>;

export interface Bus {
  /** Delivers `m` to every subscriber of its type, of every replica and this one. Never blocks
   * and never throws: a message that cannot be sent is logged and dropped. Messages of one
   * replica arrive in the order it published them; a message may be lost when the bus loses its
   * broker (onGap then tells the subscribers). */
  publish(m: BusMessage): void;
  /** Calls `fn` for each message of `type` published from now on; returns the unsubscribe.
   * `fn` must not throw (what it throws is logged by the NATS bus and not caught by the local
   * one). */
  subscribe<T extends BusMessageType>(type: T, fn: (m: BusMessageOf<T>) => void): () => void;
  /** Calls `fn` each time messages may have been missed: the connection to the broker was lost
   * (or had not been made) and is back, with every subscription in place again. The subscriber
   * reads again from the store what it follows. The local bus never calls it. */
  onGap(fn: () => void): () => void;
  /** Stops delivering and sending; what was published before is sent first where possible. */
  close(): Promise<void>;
}

/** A set of subscribers by message type, shared by both buses. */
export class BusSubscribers {
  private readonly byType = new Map<BusMessageType, Set<(m: BusMessage) => void>>();

  add<T extends BusMessageType>(type: T, fn: (m: BusMessageOf<T>) => void): () => void {
    let set = this.byType.get(type);
    if (set === undefined) {
      set = new Set();
      this.byType.set(type, set);
    }
    const entry = fn as (m: BusMessage) => void;
    set.add(entry);
    return () => set.delete(entry);
  }

  /** Calls each subscriber of `m`'s type; `onError` gets what one throws (rethrows if absent). */
  deliver(m: BusMessage, onError?: (err: unknown) => void): void {
    for (const fn of this.byType.get(m.type) ?? []) {
      if (onError === undefined) fn(m);
      else
        try {
          fn(m);
        } catch (err) {
          onError(err);
        }
    }
  }
}

/** The bus of a single hub process: synchronous delivery to its own subscribers. */
export function createLocalBus(): Bus {
  const subscribers = new BusSubscribers();
  return {
    publish: (m) => subscribers.deliver(m),
    subscribe: (type, fn) => subscribers.add(type, fn),
    onGap: () => () => {},
    close: async () => {},
  };
}
