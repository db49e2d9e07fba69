// The bus of hub replicas, on NATS (docs/hub-replicas.md): each replica publishes on the subjects
// of bus-codec.ts and hears every replica's messages, its own included.
//
// Invariants:
// - The bus connects in the background and keeps trying forever: the first connection with our
//   own backoff (connect() fails once every server refused), later ones with the client's,
//   spaced by the time already spent disconnected (so doubling) from reconnectMinMs to
//   reconnectMaxMs. A connection the client gives up on is replaced as if it were the first.
// - Each connection (the first included) ends with every subscription registered on the server
//   (a flush) before onGap's callbacks run, so what is published after they run is delivered.
// - publish() never blocks or throws. While the bus is not connected (before the first connection,
//   and from a loss it has noticed to the next connection) messages are held, at most maxHeld
//   (the oldest dropped), and sent once it is connected again. Those published between a loss and
//   the moment the bus notices it are lost (the client drops its buffer when it dials again); a
//   replica that was disconnected too is told by onGap, and the store stays the truth.
// - What arrives is decoded with bus-codec.ts; a malformed message is logged and dropped.
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { fullJitter } from "../util/backoff.ts";
import { type Clock, sleepQuietly } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import { type Bus, type BusMessage, BusSubscribers } from "./bus.ts";
import { CHANGES_SUBJECT, decodeBusMessage, encodeBusMessage, NODE_SUBJECTS } from "./bus-codec.ts";

export interface NatsBusOptions {
  /** The NATS servers ("nats://host:port" or "host:port"), tried in a random order. */
  servers: string[];
  clock: Clock;
  log: Logger;
  /** The client's name as the server shows it (the replica's id). */
  name?: string;
  /** The first wait between connection attempts (default 250 ms); it doubles up to the next. */
  reconnectMinMs?: number;
  /** The longest wait between connection attempts (default 5 s). */
  reconnectMaxMs?: number;
  /** How long a server has to answer a connection (default 5 s). */
  connectTimeoutMs?: number;
  /** How often the client pings the server; two pings unanswered end the connection
   * (default 10 s, so a silent network loss is noticed within 30 s). */
  pingIntervalMs?: number;
  /** Messages held while the bus is not connected (default 10,000). */
  maxHeld?: number;
  random?: () => number;
}

/** Counters since the bus was created. */
interface NatsBusStats {
  published: number;
  received: number;
  /** Messages not sent: invalid, over maxHeld, or refused by the client. */
  dropped: number;
  /** Messages received that did not decode. */
  malformed: number;
  /** Connections made (the first included): each one ran the onGap callbacks. */
  connections: number;
}

export interface NatsBus extends Bus {
  /** Resolves after the first connection, once its subscriptions are in place; rejects if the
   * bus is closed first. */
  ready(): Promise<void>;
  stats(): NatsBusStats;
  /** The current connection (from its connect until it closes), for the relay of streams
   * (relay/replica.ts); undefined before the first one and between one and the next. */
  connection(): NatsConnection | undefined;
}

/** A bus on the NATS servers `opts.servers`; it connects in the background (see ready()). */
export function createNatsBus(opts: NatsBusOptions): NatsBus {
  if (opts.servers.length === 0) throw new Error("The NATS bus needs at least one server");
  return new NatsBusImpl(opts);
}

class NatsBusImpl implements NatsBus {
  private readonly subscribers = new BusSubscribers();
  private readonly gapFns = new Set<() => void>();
  private readonly counts: NatsBusStats = {
    published: 0,
    received: 0,
    dropped: 0,
    malformed: 0,
    connections: 0,
  };
  private readonly stop = new AbortController();
  private readonly log: Logger;
  /** The current connection, from connect() until it closes. */
  private nc: NatsConnection | undefined;
  /** The connection while it is usable: its subscriptions in place and no loss noticed. */
  private live: NatsConnection | undefined;
  /** Published while not connected. */
  private held: BusMessage[] = [];
  /** When the current run of connection attempts started (monotonic), for their spacing. */
  private outageStart: number | undefined;
  private running: Promise<void>;
  private readonly firstConnection = Promise.withResolvers<void>();

  constructor(private readonly opts: NatsBusOptions) {
    this.log = opts.log.with({ component: "bus" });
    // ready() may never be awaited; its rejection on close must not be unhandled.
    this.firstConnection.promise.catch(() => {});
    this.running = this.connectLoop();
  }

  ready(): Promise<void> {
    return this.firstConnection.promise;
  }

  stats(): NatsBusStats {
    return { ...this.counts };
  }

  connection(): NatsConnection | undefined {
    return this.nc;
  }

  publish(m: BusMessage): void {
    const encoded = encodeBusMessage(m);
    if (this.stop.signal.aborted) this.drop("the bus is closed", m);
    else if (!encoded.ok) this.drop(encoded.reason, m);
    else if (this.live === undefined) this.hold(m);
    else
      try {
        this.live.publish(encoded.subject, encoded.body);
        this.counts.published++;
      } catch (err) {
        this.drop((err as Error).message, m);
      }
  }

  private hold(m: BusMessage): void {
    this.held.push(m);
    if (this.held.length > (this.opts.maxHeld ?? 10_000)) {
      const oldest = this.held.shift();
      this.drop("too many messages held while not connected", oldest);
    }
  }

  subscribe: Bus["subscribe"] = (type, fn) => this.subscribers.add(type, fn);

  onGap(fn: () => void): () => void {
    this.gapFns.add(fn);
    return () => this.gapFns.delete(fn);
  }

  async close(): Promise<void> {
    if (this.stop.signal.aborted) return this.running;
    this.stop.abort();
    this.firstConnection.reject(new Error("The NATS bus was closed before it connected"));
    if (this.held.length > 0)
      this.log.warn("bus closed with messages not sent", { count: this.held.length });
    const nc = this.nc;
    if (nc !== undefined && !nc.isClosed()) {
      if (this.live === nc) {
        // drain() sends what the client buffered, then closes; a server gone silent gets 2 s.
        const timeout = new AbortController();
        await Promise.race([
          nc.drain().catch(() => {}),
          sleepQuietly(this.opts.clock, 2_000, timeout.signal),
        ]);
        timeout.abort();
      }
      await nc.close().catch(() => {});
    }
    await this.running;
  }

  private drop(reason: string, m: BusMessage | undefined): void {
    this.counts.dropped++;
    this.log.warn("bus message dropped", { reason, message: m });
  }

  /** Connects (forever, until closed), then watches the connection until it ends for good. */
  private async connectLoop(): Promise<void> {
    const { clock } = this.opts;
    const signal = this.stop.signal;
    for (let attempt = 0; !signal.aborted; attempt++) {
      let nc: NatsConnection;
      try {
        nc = await connect(this.connectOptions());
      } catch (err) {
        const waitMs = fullJitter(
          attempt,
          this.opts.reconnectMinMs ?? 250,
          this.opts.reconnectMaxMs ?? 5_000,
          this.opts.random,
        );
        this.log.warn("cannot connect to NATS; trying again", {
          servers: this.opts.servers.join(","),
          error: err as Error,
          waitMs,
        });
        await sleepQuietly(clock, waitMs, signal);
        continue;
      }
      if (signal.aborted) {
        await nc.close().catch(() => {});
        return;
      }
      attempt = -1;
      const ended = await this.attach(nc);
      if (ended !== undefined && !signal.aborted)
        this.log.error("the NATS connection ended; connecting again", { error: ended });
    }
  }

  private connectOptions() {
    return {
      servers: this.opts.servers,
      name: this.opts.name,
      maxReconnectAttempts: -1,
      reconnectDelayHandler: () => this.reconnectDelay(),
      timeout: this.opts.connectTimeoutMs ?? 5_000,
      pingInterval: this.opts.pingIntervalMs ?? 10_000,
      maxPingOut: 2,
    };
  }

  /** The wait before the client's next attempt: the time spent disconnected so far, bounded. */
  private reconnectDelay(): number {
    const now = this.opts.clock.monotonic();
    this.outageStart ??= now;
    const min = this.opts.reconnectMinMs ?? 250;
    return Math.min(this.opts.reconnectMaxMs ?? 5_000, Math.max(min, now - this.outageStart));
  }

  /** Subscribes on `nc`, sends what was held, tells the gap listeners, and follows the
   * connection's status until it is closed; returns why it closed (undefined: by close()). */
  private async attach(nc: NatsConnection): Promise<Error | undefined> {
    const receive = (subject: string, body: string) => this.receive(subject, body);
    for (const subject of [CHANGES_SUBJECT, NODE_SUBJECTS])
      nc.subscribe(subject, {
        callback: (err, msg) => {
          if (err === null) receive(msg.subject, msg.string());
        },
      });
    this.nc = nc;
    void this.watchStatus(nc);
    await this.connected(nc, "connected to NATS");
    const why = await nc.closed();
    this.nc = undefined;
    this.live = undefined;
    return why instanceof Error ? why : undefined;
  }

  /** Once `nc`'s subscriptions are on the server: logs, counts and runs the gap callbacks. */
  private async connected(nc: NatsConnection, what: string): Promise<void> {
    try {
      await nc.flush();
    } catch {
      return; // lost again before the flush came back: the next connection tells instead
    }
    this.outageStart = undefined;
    this.live = nc;
    const held = this.held;
    this.held = [];
    for (const m of held) this.publish(m);
    this.counts.connections++;
    this.log.info(what, { server: nc.getServer() });
    this.firstConnection.resolve();
    for (const fn of this.gapFns)
      try {
        fn();
      } catch (err) {
        this.log.error("a bus gap callback failed", { error: err as Error });
      }
  }

  private async watchStatus(nc: NatsConnection): Promise<void> {
    for await (const s of nc.status()) {
      if (s.type === "disconnect") {
        this.live = undefined;
        this.log.warn("lost the NATS connection; reconnecting", { server: s.server });
      } else if (s.type === "reconnect") await this.connected(nc, "reconnected to NATS");
      else if (s.type === "error") this.log.warn("NATS error", { error: s.error });
    }
  }

  private receive(subject: string, body: string): void {
    const decoded = decodeBusMessage(subject, body);
    if (!decoded.ok) {
      if (decoded.ignore) return;
      this.counts.malformed++;
      this.log.warn("malformed bus message dropped", { reason: decoded.reason });
      return;
    }
    this.counts.received++;
    this.subscribers.deliver(decoded.message, (err) =>
      this.log.error("a bus subscriber failed", {
        type: decoded.message.type,
        error: err as Error,
      }),
    );
  }
}
