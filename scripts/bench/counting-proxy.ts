// A TCP proxy on loopback that counts what passes, per connection and each way, with the times
// of the first byte up and the last byte down (scripts/bench/agent-update.ts puts it between the
// agent and the hub: what it counts is what the device's link would carry, TLS included).
//
// Invariants:
// - Every byte read from one side is written to the other, in order; when a side's socket takes
//   less than it was given, the rest waits and the other side is paused until it drains.
// - `up` counts bytes read from the client, `down` bytes read from the server (all of them are
//   passed on unless the connection is cut).
import type { Socket, TCPSocketListener } from "bun";

/** One client connection, as counted. Times are Date.now() values. */
export interface ConnCount {
  openedAt: number;
  /** Bytes the client sent (requests). */
  up: number;
  /** Bytes the server sent (answers). */
  down: number;
  /** The first byte from the client since the connection opened or the last mark(). */
  firstUpAt?: number;
  /** When the last byte from the server was handed to the client's socket. */
  lastDownAt?: number;
  closedAt?: number;
}

/** One direction of a link: the socket written to, what waits for it, and the other side. */
interface Way {
  to: Socket<unknown> | undefined;
  waiting: Uint8Array[];
  /** The socket read from, paused while `waiting` is not empty. */
  from: () => Socket<unknown> | undefined;
  /** The side read from has closed: `to` is ended once `waiting` is written. */
  ended: boolean;
}

interface Link {
  count: ConnCount;
  client: Socket<Link>;
  upstream: Socket<undefined> | undefined;
  /** Client → server. */
  up: Way;
  /** Server → client. */
  down: Way;
}

export class CountingProxy {
  /** Every connection since start, in the order they were opened. */
  readonly conns: ConnCount[] = [];
  private listener: TCPSocketListener<Link> | undefined;
  private readonly links = new Set<Link>();

  constructor(private readonly target: { hostname: string; port: number }) {}

  /** The port the proxy listens on (127.0.0.1). */
  get port(): number {
    if (this.listener === undefined) throw new Error("the counting proxy is not started");
    return this.listener.port;
  }

  start(): void {
    this.listener = Bun.listen<Link>({
      hostname: "127.0.0.1",
      port: 0,
      socket: {
        open: (client) => this.open(client),
        data: (client, chunk) => this.pass(client.data, client.data.up, chunk),
        drain: (client) => this.flush(client.data, client.data.down),
        close: (client) => this.ended(client.data, client.data.up),
        error: (client) => this.close(client.data),
      },
    });
  }

  /** From now on, each connection's firstUpAt is its first byte up after this call (a client
   * may send a new request on a connection it keeps open). */
  mark(): void {
    for (const c of this.conns) c.firstUpAt = undefined;
  }

  stop(): void {
    for (const link of [...this.links]) {
      link.upstream?.terminate();
      link.client.terminate();
      this.close(link);
    }
    this.listener?.stop(true);
    this.listener = undefined;
  }

  private open(client: Socket<Link>): void {
    const count: ConnCount = { openedAt: Date.now(), up: 0, down: 0 };
    const link: Link = {
      count,
      client,
      upstream: undefined,
      up: { to: undefined, waiting: [], from: () => link.client as Socket<unknown>, ended: false },
      down: { to: client as Socket<unknown>, waiting: [], from: () => link.upstream, ended: false },
    };
    client.data = link;
    this.conns.push(count);
    this.links.add(link);
    Bun.connect({
      ...this.target,
      socket: {
        data: (_s, chunk) => this.pass(link, link.down, chunk),
        drain: () => this.flush(link, link.up),
        close: () => this.ended(link, link.down),
        error: () => this.close(link),
      },
    }).then(
      (upstream) => {
        if (!this.links.has(link)) {
          upstream.terminate();
          return;
        }
        link.upstream = upstream;
        link.up.to = upstream as Socket<unknown>;
        this.flush(link, link.up);
      },
      () => this.close(link),
    );
  }

  /** Counts `chunk` and writes it on (or queues it behind what waits). */
  private pass(link: Link, way: Way, chunk: Uint8Array): void {
    const now = Date.now();
    if (way === link.up) {
      link.count.up += chunk.byteLength;
      link.count.firstUpAt ??= now;
    } else link.count.down += chunk.byteLength;
    way.waiting.push(new Uint8Array(chunk));
    this.flush(link, way);
  }

  /** Writes what waits for `way.to`; pauses the other side while anything is left. */
  private flush(link: Link, way: Way): void {
    const to = way.to;
    if (to === undefined) return;
    while (way.waiting.length > 0) {
      const head = way.waiting[0] as Uint8Array;
      const written = to.write(head);
      if (written < head.byteLength) {
        way.waiting[0] = head.subarray(Math.max(0, written));
        way.from()?.pause();
        return;
      }
      way.waiting.shift();
    }
    if (way === link.down) link.count.lastDownAt = Date.now();
    if (way.ended) this.close(link);
    else way.from()?.resume();
  }

  /** The side `way` reads from closed: the rest is written, then the link is closed. */
  private ended(link: Link, way: Way): void {
    way.ended = true;
    if (way.waiting.length === 0 || way.to === undefined) this.close(link);
  }

  private close(link: Link): void {
    if (!this.links.has(link)) return;
    this.links.delete(link);
    link.count.closedAt = Date.now();
    link.upstream?.end();
    link.client.end();
  }
}
