// A TCP proxy on loopback in front of a server (the test registry), standing in for a slow,
// unreliable link: what the server sends is passed on at most `bytesPerSecond` (all connections
// together), can be held back entirely (stall) and every connection can be cut at once (a
// dropped link). It counts the bytes it passed on to clients. What clients send (requests) goes
// through at once.
//
// Invariants:
// - At most about two ticks' worth of bytes waits per connection: beyond that the proxy stops
//   reading from the server (pause), so the server's own pace follows the link's.
// - bytesServed counts only bytes written to a client socket, never bytes dropped by a cut.
import type { Socket, TCPSocketListener } from "bun";

/** One client connection and its connection to the server. */
interface Link {
  client: Socket<Link>;
  upstream: Socket<undefined> | undefined;
  /** What the server sent that the client has not been given yet, oldest first. */
  pending: Uint8Array[];
  pendingBytes: number;
  /** Client bytes that arrived before the server connection was open. */
  early: Uint8Array[];
  /** Whether reading from the server is paused because `pending` is full. */
  paused: boolean;
  /** The server closed its side (or could not be reached). */
  serverDone: boolean;
}

export interface ThrottleProxyOptions {
  /** The server behind the proxy. */
  target: { hostname: string; port: number };
  /** Bytes a second passed on to clients, all connections together. */
  bytesPerSecond: number;
}

/** How often the proxy passes on its share of bytes. */
const TICK_MS = 50;

export class ThrottleProxy {
  /** Bytes passed on to clients since start (or the last resetCount()). */
  bytesServed = 0;
  /** Connections cut by cutAll() since start. */
  cuts = 0;
  private bytesPerSecond: number;
  private stalled = false;
  private listener: TCPSocketListener<Link> | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  private readonly links = new Set<Link>();

  constructor(private readonly opts: ThrottleProxyOptions) {
    this.bytesPerSecond = opts.bytesPerSecond;
  }

  /** The port the proxy listens on (127.0.0.1). */
  get port(): number {
    if (this.listener === undefined) throw new Error("the throttle proxy is not started");
    return this.listener.port;
  }

  /** "127.0.0.1:PORT", as an image reference's registry. */
  get host(): string {
    return `127.0.0.1:${this.port}`;
  }

  start(): void {
    this.listener = Bun.listen<Link>({
      hostname: "127.0.0.1",
      port: 0,
      socket: {
        open: (client) => this.open(client),
        data: (client, chunk) => this.fromClient(client.data, chunk),
        close: (client) => this.close(client.data),
        error: (client) => this.close(client.data),
      },
    });
    this.timer = setInterval(() => this.tick(), TICK_MS);
  }

  /** Changes the rate from now on. */
  setRate(bytesPerSecond: number): void {
    this.bytesPerSecond = bytesPerSecond;
  }

  /** Holds back everything the server sends (connections stay open) until resume(). */
  stall(): void {
    this.stalled = true;
  }

  resume(): void {
    this.stalled = false;
  }

  /** Cuts every connection at once (a reset, as a dropped link looks to the client); what was
   * held back is lost. Returns how many were cut. */
  cutAll(): number {
    const links = [...this.links];
    for (const link of links) {
      link.upstream?.terminate();
      link.client.terminate();
      this.close(link);
    }
    this.cuts += links.length;
    return links.length;
  }

  /** Open client connections. */
  get connections(): number {
    return this.links.size;
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    this.cutAll();
    this.listener?.stop(true);
    this.listener = undefined;
  }

  private open(client: Socket<Link>): void {
    const link: Link = {
      client,
      upstream: undefined,
      pending: [],
      pendingBytes: 0,
      early: [],
      paused: false,
      serverDone: false,
    };
    client.data = link;
    this.links.add(link);
    Bun.connect({
      ...this.opts.target,
      socket: {
        data: (_s, chunk) => this.fromServer(link, chunk),
        close: () => this.endLink(link),
        error: () => this.endLink(link),
      },
    }).then(
      (upstream) => {
        if (!this.links.has(link)) {
          upstream.terminate();
          return;
        }
        link.upstream = upstream;
        for (const chunk of link.early.splice(0)) upstream.write(chunk);
      },
      () => this.endLink(link),
    );
  }

  private fromClient(link: Link, chunk: Uint8Array): void {
    if (link.upstream === undefined) link.early.push(new Uint8Array(chunk));
    else link.upstream.write(chunk);
  }

  private fromServer(link: Link, chunk: Uint8Array): void {
    link.pending.push(new Uint8Array(chunk));
    link.pendingBytes += chunk.byteLength;
    if (link.pendingBytes > 2 * this.perTick() && !link.paused) {
      link.paused = true;
      link.upstream?.pause();
    }
  }

  /** The server closed: the client gets the rest at the link's pace, then is closed. */
  private endLink(link: Link): void {
    link.upstream = undefined;
    link.serverDone = true;
    if (link.pendingBytes === 0) {
      link.client.end();
      this.links.delete(link);
    }
  }

  private close(link: Link | undefined): void {
    if (link === undefined || !this.links.has(link)) return;
    this.links.delete(link);
    link.upstream?.end();
    link.pending = [];
    link.pendingBytes = 0;
  }

  private perTick(): number {
    return Math.max(1, Math.floor((this.bytesPerSecond * TICK_MS) / 1000));
  }

  /** Passes on this tick's share, connections taking turns. */
  private tick(): void {
    if (this.stalled) return;
    let budget = this.perTick();
    const waiting = [...this.links].filter((l) => l.pendingBytes > 0);
    while (budget > 0 && waiting.length > 0) {
      const share = Math.max(1, Math.floor(budget / waiting.length));
      for (const link of waiting.splice(0)) {
        const sent = this.send(link, Math.min(share, budget));
        budget -= sent;
        if (sent > 0 && link.pendingBytes > 0) waiting.push(link);
      }
    }
    for (const link of this.links) this.afterTick(link);
  }

  /** Writes up to `max` pending bytes to the client; returns how many it took. */
  private send(link: Link, max: number): number {
    let sent = 0;
    while (sent < max && link.pending.length > 0) {
      const head = link.pending[0] as Uint8Array;
      const n = Math.min(head.byteLength, max - sent);
      const written = link.client.write(head, 0, n);
      if (written <= 0) break;
      sent += written;
      if (written === head.byteLength) link.pending.shift();
      else link.pending[0] = head.subarray(written);
      if (written < n) break;
    }
    link.pendingBytes -= sent;
    this.bytesServed += sent;
    return sent;
  }

  /** Reads from the server again once the backlog has gone down; closes a finished link. */
  private afterTick(link: Link): void {
    if (link.paused && link.pendingBytes <= this.perTick()) {
      link.paused = false;
      link.upstream?.resume();
    }
    if (link.serverDone && link.pendingBytes === 0) {
      link.client.end();
      this.links.delete(link);
    }
  }
}
