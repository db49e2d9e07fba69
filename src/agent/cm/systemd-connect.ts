// The systemd cgroup driver's link to systemd: a D-Bus connection to systemd's private socket
// (root only, no message bus needed), else to the system bus, with the unit manager on top. When
// the connection ends (systemd re-executing itself after an upgrade closes its private socket),
// the call in flight fails, naming itself, and the next call connects again; the sync that made
// the failed call retries it.
import type { Clock } from "../../util/clock.ts";
import { connectDBus, type DBusConnection } from "../../util/dbus/connection.ts";
import { SYSTEMD, SystemdManager } from "../../util/dbus/systemd-manager.ts";
import type { UnitProperty } from "../../util/dbus/unit-properties.ts";
import type { Logger } from "../../util/log.ts";
import type { SystemdUnits } from "./cgroup-systemd.ts";

interface SystemdSocket {
  path: string;
  /** A message bus (Hello first) rather than systemd's own peer-to-peer socket. */
  bus: boolean;
}

/** Where systemd is reached, in the order tried. */
const SYSTEMD_SOCKETS: readonly SystemdSocket[] = [
  { path: "/run/systemd/private", bus: false },
  { path: "/run/dbus/system_bus_socket", bus: true },
];

export interface SystemdConnectOptions {
  clock: Clock;
  logger: Logger;
  sockets?: readonly SystemdSocket[];
  /** Deadline for connecting and authenticating on each socket (default 15 s: a device busy
   * starting its pods answered after more than 5 s, and missing the private socket's deadline
   * moves the agent to the system bus for good; a missing socket fails at once). */
  connectTimeoutMs?: number;
  /** Deadline of each call (default 10 s). */
  callTimeoutMs?: number;
  /** Deadline for a start or stop job to end (default 30 s, as runc waits). */
  jobTimeoutMs?: number;
}

interface Session {
  conn: DBusConnection;
  manager: SystemdManager;
}

/** Connects to systemd and reads its version; throws naming every socket tried when none
 * answers. */
export async function connectSystemd(opts: SystemdConnectOptions): Promise<SystemdUnits> {
  const link = new SystemdLink(opts);
  const { manager, conn } = await link.session();
  const raw = String(await manager.unitProperty(SYSTEMD.path, SYSTEMD.interface, "Version"));
  link.version = Number.parseInt(raw, 10) || 0;
  opts.logger.info("connected to systemd", {
    version: raw,
    via: conn.uniqueName === undefined ? "private socket" : "system bus",
  });
  return link;
}

class SystemdLink implements SystemdUnits {
  version = 0;
  private current: Promise<Session> | undefined;
  private closed = false;

  constructor(private readonly opts: SystemdConnectOptions) {}

  /** The open session, connecting first when there is none. */
  session(): Promise<Session> {
    if (this.closed) return Promise.reject(new Error("the connection to systemd was closed"));
    if (this.current === undefined) {
      const opening = this.open();
      this.current = opening;
      opening.catch(() => {
        if (this.current === opening) this.current = undefined;
      });
    }
    return this.current;
  }

  private async open(): Promise<Session> {
    const { clock, logger } = this.opts;
    const failures: string[] = [];
    for (const socket of this.opts.sockets ?? SYSTEMD_SOCKETS) {
      let conn: DBusConnection | undefined;
      try {
        conn = await connectDBus({
          ...socket,
          clock,
          timeoutMs: this.opts.connectTimeoutMs ?? 15_000,
        });
        const manager = await SystemdManager.create({
          conn,
          clock,
          callTimeoutMs: this.opts.callTimeoutMs ?? 10_000,
          jobTimeoutMs: this.opts.jobTimeoutMs ?? 30_000,
        });
        const session = { conn, manager };
        void conn.closed.then((reason) => this.lost(session, reason));
        return session;
      } catch (err) {
        conn?.close();
        failures.push(`${socket.path}: ${(err as Error).message}`);
      }
    }
    logger.debug("cannot reach systemd", { tried: failures });
    throw new Error(`Cannot reach systemd over D-Bus (${failures.join("; ")})`);
  }

  private lost(session: Session, reason: Error | undefined): void {
    session.manager.close();
    void this.current?.then((s) => {
      if (s === session) this.current = undefined;
    });
    if (!this.closed) {
      this.opts.logger.warn("connection to systemd lost; the next call connects again", {
        reason: reason?.message,
      });
    }
  }

  async startTransientUnit(name: string, properties: UnitProperty[]): Promise<void> {
    await (await this.session()).manager.startTransientUnit(name, properties);
  }

  async setUnitProperties(name: string, properties: UnitProperty[]): Promise<void> {
    await (await this.session()).manager.setUnitProperties(name, properties);
  }

  async stopUnit(name: string): Promise<void> {
    await (await this.session()).manager.stopUnit(name);
  }

  async resetFailedUnit(name: string): Promise<void> {
    await (await this.session()).manager.resetFailedUnit(name);
  }

  close(): void {
    this.closed = true;
    void this.current?.then(
      (s) => s.conn.close(),
      () => undefined,
    );
    this.current = undefined;
  }
}
