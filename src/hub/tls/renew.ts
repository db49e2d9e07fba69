// Renewing the hub's own serving certificate while it runs (docs/protocol.md, "TLS and trust"):
// a check on a timer (daily by default) makes a new certificate with the same CA when the one
// served nears its end, and hands it to `apply`, which serves it to new connections. Agents keep
// trusting the hub because the CA is unchanged. The check never throws: a failure is logged and
// the next check tries again, while the certificate served so far stays.
// A renewed certificate is served by a new listener on the same port (Listener): Bun's
// server.reload() does not take a new certificate. The old listener stops accepting at once and
// keeps its open connections, agents' WebSockets and followed logs included, until they close.
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import type { HubTls } from "./index.ts";

/** A certificate to serve; `renewed`: not the one served so far. */
export type RenewedTls = HubTls & { renewed: boolean };

export interface TlsRenewalDeps {
  clock: Clock;
  log: Logger;
  /** The certificate as of `now`, made again when it nears its end (ownTls), or taken from the
   * replicas' store (replica-tls.ts). */
  renew(now: number): RenewedTls | Promise<RenewedTls>;
  /** Serves `tls` to new connections from now on (connections already open keep theirs). */
  apply(tls: HubTls): void;
  /** Time between checks. */
  intervalMs: number;
}

/** What the listener needs of a server (Bun's Server). */
interface Serving {
  readonly port: number | undefined;
  stop(closeActiveConnections?: boolean): Promise<void>;
}

/** The hub's listener: one server accepting, and the retired ones draining. */
class Listener<S extends Serving> {
  /** The server accepting new connections. */
  server: S;
  /** Servers that stopped accepting and may still carry connections. */
  private readonly retired: S[] = [];

  /** `start(tls, port)` starts a server (port 0: any free one). */
  constructor(
    private readonly start: (tls: HubTls | undefined, port: number) => S,
    tls: HubTls | undefined,
    port: number,
  ) {
    this.server = start(tls, port);
  }

  /** Serves `tls` to new connections: a new server on the same port, the old one retired. */
  serveCertificate(tls: HubTls): void {
    const old = this.server;
    const port = old.port ?? 0;
    void old.stop(false);
    this.retired.push(old);
    this.server = this.start(tls, port);
  }

  /** Stops every server, closing their connections. */
  async stop(): Promise<void> {
    await Promise.all([this.server, ...this.retired].map((s) => s.stop(true)));
  }
}

/** What listenRenewing() needs of the hub's options. */
export interface RenewingOptions {
  /** The certificate to serve first (absent: plain HTTP, nothing to renew). */
  tls?: HubTls;
  port: number;
  /** The hub's own certificate as of `now`, made again near its end (absent: none to renew). */
  renewTls?: (now: number) => RenewedTls | Promise<RenewedTls>;
  /** Time between checks (default 24 h). */
  tlsCheckIntervalMs?: number;
  clock: Clock;
  log: Logger;
}

/** A listener started with `start`, checking the hub's own certificate on a timer and serving
 * a renewed one; stop() ends both. */
export function listenRenewing<S extends Serving>(
  start: (tls: HubTls | undefined, port: number) => S,
  opts: RenewingOptions,
): { port: number | undefined; stop(): Promise<void> } {
  const listener = new Listener(start, opts.tls, opts.port);
  let renewal: TlsRenewal | undefined;
  if (opts.renewTls !== undefined && opts.tls !== undefined) {
    renewal = new TlsRenewal({
      clock: opts.clock,
      log: opts.log,
      renew: opts.renewTls,
      apply: (tls) => listener.serveCertificate(tls),
      intervalMs: opts.tlsCheckIntervalMs ?? 86_400_000,
    });
    renewal.run();
  }
  return {
    port: listener.server.port,
    async stop() {
      renewal?.stop();
      await listener.stop();
    },
  };
}

export class TlsRenewal {
  /** The pending check's cancel; undefined once stopped. */
  private cancel: (() => void) | undefined;
  private stopped = false;

  constructor(private readonly deps: TlsRenewalDeps) {}

  /** Checks now and on every interval until stop(). */
  run(): void {
    const loop = () => {
      void this.check();
      this.cancel = this.deps.clock.setTimer(this.deps.intervalMs, loop);
    };
    this.cancel = this.deps.clock.setTimer(this.deps.intervalMs, loop);
  }

  /** One check (the loop's iteration): true when a new certificate is served. */
  async check(): Promise<boolean> {
    const { log } = this.deps;
    try {
      const tls = await this.deps.renew(this.deps.clock.now());
      // A renewal answered after stop() is not served.
      if (!tls.renewed || this.stopped) return false;
      this.deps.apply(tls);
      log.info("renewed the hub's serving certificate; new connections get it");
      return true;
    } catch (err) {
      log.error("cannot renew the hub's serving certificate; serving the current one", {
        error: err,
        retryInMs: this.deps.intervalMs,
      });
      return false;
    }
  }

  stop(): void {
    this.stopped = true;
    this.cancel?.();
    this.cancel = undefined;
  }
}
