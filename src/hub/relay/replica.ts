// The relay of one hub replica, on its bus's NATS connection (docs/hub-replicas.md, "Streams
// across replicas"): the nodes whose agents are connected here are served to the other replicas,
// and a stream to a node held elsewhere is opened through the replica that serves it; so is a
// question about the node that only its holder can answer (its health history).
//
// Invariants:
// - Every node held here is served on the bus's current connection from the moment that
//   connection is usable. The client keeps a connection's subscriptions across reconnects (a NATS
//   server restarted included); a connection the bus replaces gets a new relay, and every held
//   node is served on it again.
// - Before the bus's first connection, opener() fails its opens with 503; release() and close()
//   stop serving at once (streams open go on to their end).
import type { NatsConnection } from "@nats-io/transport-node";
import { type OpenStream, StreamFailure } from "../../streams/types.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import type { NodeQuestion } from "./codec.ts";
import { createStreamRelay, type StreamRelay, type StreamRelayOptions } from "./index.ts";

/** The part of the NATS bus (bus-nats.ts) the relay rides on. */
export interface RelayBus {
  /** The bus's connection now, if it has one. */
  connection(): NatsConnection | undefined;
  /** Calls `fn` each time a connection (the first included) is usable again. */
  onGap(fn: () => void): () => void;
}

export interface ReplicaStreams {
  /** Streams to `node` through the replica that holds it (503 when none does). */
  opener(node: string): OpenStream;
  /** The agent of `node` is connected here: serve it with `open`, and the questions about it with
   * `answer`, until release(). */
  hold(node: string, open: OpenStream, answer?: (q: NodeQuestion) => unknown): void;
  /** Asks the replica holding `node`: its answer, or undefined when no replica holds it (rejects
   * with a StreamFailure: 503 when this replica is not yet connected to NATS, 504 when the
   * holder did not answer). */
  ask(node: string, q: NodeQuestion): Promise<unknown>;
  /** The agent of `node` is no longer connected here. */
  release(node: string): void;
  /** Stops serving every node. */
  close(): void;
}

type RelayTimings = Omit<StreamRelayOptions, "nc" | "clock" | "log">;

export function createReplicaStreams(
  bus: RelayBus,
  o: { clock: Clock; log: Logger } & RelayTimings,
): ReplicaStreams {
  return new Replica(bus, o);
}

interface Held {
  open: OpenStream;
  answer: ((q: NodeQuestion) => unknown) | undefined;
  /** Stops serving the node on the current relay (undefined: not served on it). */
  stop: (() => void) | undefined;
}

class Replica implements ReplicaStreams {
  /** The relay on the bus's connection `nc`. */
  private current: { nc: NatsConnection; relay: StreamRelay } | undefined;
  /** The nodes held here: their opener, and how to stop serving them on the current relay. */
  private readonly held = new Map<string, Held>();
  private readonly stopGap: () => void;

  constructor(
    private readonly bus: RelayBus,
    private readonly o: { clock: Clock; log: Logger } & RelayTimings,
  ) {
    this.stopGap = bus.onGap(() => this.connected());
    this.connected();
  }

  /** Serves every held node on a connection the relay does not ride yet. */
  private connected(): void {
    const nc = this.bus.connection();
    if (nc === undefined || nc === this.current?.nc) return;
    for (const h of this.held.values()) h.stop?.();
    const relay = createStreamRelay({ ...this.o, nc });
    this.current = { nc, relay };
    for (const [node, h] of this.held) h.stop = this.serve(relay, node, h);
  }

  private serve(relay: StreamRelay, node: string, h: Omit<Held, "stop">) {
    try {
      return relay.serve(node, h.open, h.answer);
    } catch (err) {
      // The connection closed under us: the bus's next connection serves the node again.
      this.o.log.warn("cannot serve a node's streams to other replicas", { node, error: err });
      return undefined;
    }
  }

  opener(node: string): OpenStream {
    return (req, out, signal) => {
      const relay = this.current?.relay;
      if (relay === undefined) return Promise.reject(notConnected(node));
      return relay.opener(node)(req, out, signal);
    };
  }

  ask(node: string, q: NodeQuestion): Promise<unknown> {
    const relay = this.current?.relay;
    if (relay === undefined) return Promise.reject(notConnected(node));
    return relay.ask(node, q);
  }

  hold(node: string, open: OpenStream, answer?: (q: NodeQuestion) => unknown): void {
    if (this.held.has(node)) return;
    const relay = this.current?.relay;
    const h = { open, answer };
    this.held.set(node, { ...h, stop: relay && this.serve(relay, node, h) });
  }

  release(node: string): void {
    const h = this.held.get(node);
    if (h === undefined) return;
    this.held.delete(node);
    try {
      h.stop?.();
    } catch {
      // The connection is closed: nothing is served on it any more.
    }
  }

  close(): void {
    this.stopGap();
    for (const node of [...this.held.keys()]) this.release(node);
  }
}

const notConnected = (node: string) =>
  new StreamFailure(
    503,
    "ServiceUnavailable",
    `node "${node}" is not connected to this hub replica, and the replica is not yet connected to NATS to reach the one that holds it`,
  );
