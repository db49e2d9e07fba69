// The hub's bus: "something changed for this device, tell whoever holds its connection". One
// hub process delivers in-process (createLocalBus); several hub replicas would deliver through a
// broker (NATS, or PostgreSQL LISTEN/NOTIFY) behind the same interface (docs: DESIGN, "The hub,
// now and at scale").

type BusMessage = {
  /** The device's desired state has a new generation: send it if connected. */
  type: "desired";
  node: string;
};

export interface Bus {
  /** Delivers `m` to every subscriber (of every replica), in order, at most once each. */
  publish(m: BusMessage): void;
  /** Calls `fn` for each message published from now on; returns the unsubscribe. */
  subscribe(fn: (m: BusMessage) => void): () => void;
}

/** The bus of a single hub process: synchronous delivery to its own subscribers. */
export function createLocalBus(): Bus {
  const subscribers = new Set<(m: BusMessage) => void>();
  return {
    publish(m) {
      for (const fn of subscribers) fn(m);
    },
    subscribe(fn) {
      subscribers.add(fn);
      return () => subscribers.delete(fn);
    },
  };
}
