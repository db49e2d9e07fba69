// A fake org.freedesktop.systemd1 for unit tests: it owns the name on a (private) bus through
// fleetlet's own D-Bus connection and answers the Manager calls the cgroup driver makes, keeping
// units in memory and sending JobRemoved when a job ends. Tests choose how a unit's start job
// ends (jobResults), hold jobs forever (holdJobs), or send JobRemoved before the reply
// (signalBeforeReply).
import net from "node:net";
import { realClock } from "../../src/util/clock.ts";
import { connectDBus, DBusConnection, DBusError } from "../../src/util/dbus/connection.ts";
import type { Message } from "../../src/util/dbus/message.ts";
import { SYSTEMD } from "../../src/util/dbus/systemd-manager.ts";
import { type DBusValue, Variant } from "../../src/util/dbus/types.ts";

export interface FakeUnit {
  name: string;
  activeState: string;
  /** Every property set on the unit, last value wins, with its D-Bus signature. */
  properties: Map<string, Variant>;
  aux: DBusValue;
}

const T = { timeoutMs: 5_000 };

export class FakeSystemd {
  readonly units = new Map<string, FakeUnit>();
  /** How a unit's start job ends (default "done"). */
  readonly jobResults = new Map<string, string>();
  /** Send no JobRemoved at all (a job that never ends). */
  holdJobs = false;
  /** Send JobRemoved before the method's reply instead of after it. */
  signalBeforeReply = false;
  /** Every method called, "Member name". */
  readonly calls: string[] = [];
  /** The Manager's Version property. */
  version = "252.30-1~deb12u2";
  private nextJob = 1;

  private constructor(readonly conn: DBusConnection) {}

  /** Connects to the bus at `path` and owns org.freedesktop.systemd1. */
  static async start(path: string): Promise<FakeSystemd> {
    const conn = await connectDBus({ path, bus: true, clock: realClock, timeoutMs: 5_000 });
    const owned = await conn.callBus("RequestName", "su", [SYSTEMD.destination, 4], T);
    if (owned.body[0] !== 1) {
      throw new Error(`fake systemd could not own its name: ${owned.body[0]}`);
    }
    return FakeSystemd.attach(conn);
  }

  /** Answers systemd's calls on `conn` (a peer-to-peer connection, as /run/systemd/private). */
  static attach(conn: DBusConnection): FakeSystemd {
    const fake = new FakeSystemd(conn);
    conn.handleCalls((m) => fake.answer(m));
    return fake;
  }

  close(): void {
    this.conn.close();
  }

  private async answer(m: Message): Promise<{ signature: string; body: DBusValue[] }> {
    this.calls.push(`${m.member} ${typeof m.body[0] === "string" ? m.body[0] : ""}`.trim());
    if (m.interface === "org.freedesktop.DBus.Properties" && m.member === "Get") return this.get(m);
    if (m.path !== SYSTEMD.path || m.interface !== SYSTEMD.interface) {
      throw new DBusError("org.freedesktop.DBus.Error.UnknownObject", `no ${m.path}`);
    }
    const name = String(m.body[0]);
    switch (m.member) {
      case "Subscribe":
        return { signature: "", body: [] };
      case "StartTransientUnit":
        return this.start(name, m.body[2] as [string, Variant][], m.body[3] ?? []);
      case "StopUnit":
        this.unit(name);
        this.units.delete(name);
        return this.job(name, "done");
      case "SetUnitProperties": {
        const unit = this.unit(name);
        for (const [k, v] of m.body[2] as [string, Variant][]) unit.properties.set(k, v);
        return { signature: "", body: [] };
      }
      case "GetUnit":
        this.unit(name);
        return { signature: "o", body: [unitPath(name)] };
      case "ResetFailedUnit":
        if (this.unit(name).activeState === "failed") this.units.delete(name);
        return { signature: "", body: [] };
    }
    throw new DBusError("org.freedesktop.DBus.Error.UnknownMethod", `no method ${m.member}`);
  }

  private unit(name: string): FakeUnit {
    const u = this.units.get(name);
    if (u === undefined)
      throw new DBusError("org.freedesktop.systemd1.NoSuchUnit", `Unit ${name} not loaded.`);
    return u;
  }

  private start(name: string, props: [string, Variant][], aux: DBusValue) {
    if (this.units.has(name)) {
      throw new DBusError(
        "org.freedesktop.systemd1.UnitExists",
        `Unit ${name} was already loaded or has a fragment file.`,
      );
    }
    const result = this.jobResults.get(name) ?? "done";
    const properties = new Map(props);
    this.units.set(name, {
      name,
      activeState: result === "done" ? "active" : "failed",
      properties,
      aux,
    });
    return this.job(name, result);
  }

  /** A new job for `unit` ending with `result`, its JobRemoved sent before or after the reply. */
  private async job(unit: string, result: string) {
    const id = this.nextJob++;
    const job = `/org/freedesktop/systemd1/job/${id}`;
    const send = () => this.signal("JobRemoved", "uoss", [id, job, unit, result]);
    if (!this.holdJobs && this.signalBeforeReply) send();
    else if (!this.holdJobs) setImmediate(send);
    return { signature: "o", body: [job] };
  }

  private signal(member: string, signature: string, body: DBusValue[]): void {
    this.conn.send({
      kind: "signal",
      flags: 0,
      serial: 0,
      ...SYSTEMD,
      destination: undefined,
      member,
      signature,
      body,
    });
  }

  private get(m: Message): { signature: string; body: DBusValue[] } {
    if (m.path === SYSTEMD.path && m.body[0] === SYSTEMD.interface && m.body[1] === "Version")
      return { signature: "v", body: [new Variant("s", this.version)] };
    const unit = [...this.units.values()].find((u) => unitPath(u.name) === m.path);
    if (unit === undefined || m.body[1] !== "ActiveState") {
      throw new DBusError(
        "org.freedesktop.DBus.Error.UnknownProperty",
        `no ${m.body[1]} at ${m.path}`,
      );
    }
    return { signature: "v", body: [new Variant("s", unit.activeState)] };
  }
}

/** systemd's object path of a unit: every byte but [A-Za-z0-9] as _XX. */
export function unitPath(name: string): string {
  const escaped = [...Buffer.from(name)]
    .map((b) =>
      /[A-Za-z0-9]/.test(String.fromCharCode(b))
        ? String.fromCharCode(b)
        : `_${b.toString(16).padStart(2, "0")}`,
    )
    .join("");
  return `/org/freedesktop/systemd1/unit/${escaped}`;
}

/**
 * A peer-to-peer socket at `path` served as systemd serves /run/systemd/private: it takes any
 * EXTERNAL authentication, needs no Hello, and answers each client with a FakeSystemd, handed to
 * `onClient`. Resolves once it listens; returns a function that stops it.
 */
export async function servePrivateSocket(
  path: string,
  onClient: (fake: FakeSystemd) => void,
): Promise<() => void> {
  const server = net.createServer((socket) => {
    let got = Buffer.alloc(0);
    let answered = false;
    const onData = (chunk: Buffer) => {
      got = Buffer.concat([got, chunk]);
      if (!answered && got.includes("\r\n")) {
        answered = true;
        socket.write(`OK ${"0123456789abcdef".repeat(2)}\r\n`);
      }
      const begin = got.indexOf("BEGIN\r\n");
      if (begin < 0) return;
      socket.off("data", onData);
      const conn = new DBusConnection(socket, realClock);
      onClient(FakeSystemd.attach(conn));
      conn.receive(new Uint8Array(got.subarray(begin + 7)));
    };
    socket.on("data", onData);
  });
  await new Promise<void>((r) => server.listen(path, r));
  return () => server.close();
}
