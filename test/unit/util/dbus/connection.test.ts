// The D-Bus connection against a real message bus (a private dbus-daemon the test starts) and
// against small fake peers on a unix socket for what a bus never does (refusing auth, sending
// garbage).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeClock, realClock } from "../../../../src/util/clock.ts";
import {
  connectDBus,
  type DBusConnection,
  DBusError,
} from "../../../../src/util/dbus/connection.ts";
import type { Message } from "../../../../src/util/dbus/message.ts";
import { authLine, parseAuthReply } from "../../../../src/util/dbus/sasl.ts";
import { Variant } from "../../../../src/util/dbus/types.ts";
import { type PrivateBus, startPrivateBus } from "../../../lib/dbus-daemon.ts";

const T = { timeoutMs: 5_000 };

describe("DBusConnection on a private dbus-daemon (needs /usr/bin/dbus-daemon; no root)", () => {
  let bus: PrivateBus;
  const conns: DBusConnection[] = [];
  const connect = async (clock = realClock) => {
    const c = await connectDBus({ path: bus.path, bus: true, clock, timeoutMs: 5_000 });
    conns.push(c);
    return c;
  };

  beforeAll(async () => {
    bus = await startPrivateBus();
  });
  afterAll(async () => {
    for (const c of conns) c.close();
    await bus.stop();
  });

  test("Hello gives the connection its unique name, which ListNames then lists", async () => {
    const c = await connect();
    expect(c.uniqueName).toMatch(/^:1\.\d+$/);
    const reply = await c.callBus("ListNames", "", [], T);
    expect(reply.signature).toBe("as");
    expect(reply.body[0]).toContain("org.freedesktop.DBus");
    expect(reply.body[0]).toContain(c.uniqueName);
  });

  test("a dict of variants from the bus reads as pairs (GetConnectionCredentials)", async () => {
    const c = await connect();
    const reply = await c.callBus("GetConnectionCredentials", "s", [c.uniqueName ?? ""], T);
    expect(reply.signature).toBe("a{sv}");
    const creds = new Map(reply.body[0] as [string, Variant][]);
    expect(creds.get("UnixUserID")).toEqual(new Variant("u", process.getuid?.() ?? 0));
    expect(creds.get("ProcessID")).toEqual(new Variant("u", process.pid));
  });

  test("an error reply rejects with the peer's error name and text", async () => {
    const c = await connect();
    const err = await c.callBus("GetNameOwner", "s", ["org.example.Nobody"], T).catch((e) => e);
    expect(err).toBeInstanceOf(DBusError);
    expect(err.errorName).toBe("org.freedesktop.DBus.Error.NameHasNoOwner");
    expect(err.message).toContain("org.example.Nobody");
  });

  test("after AddMatch a signal sent by another connection arrives with its body, past a handler that throws", async () => {
    const [listener, sender] = [await connect(), await connect()];
    await listener.addMatch("type='signal',interface='org.example.Test',member='Ping'", T);
    listener.onSignal(() => {
      throw new Error("a handler's own bug");
    });
    const got = new Promise<Message>((resolve) => listener.onSignal(resolve));
    sender.send({
      kind: "signal",
      flags: 0,
      serial: 0,
      path: "/org/example",
      interface: "org.example.Test",
      member: "Ping",
      signature: "us",
      body: [7, "hello"],
    });
    const m = await got;
    expect(m.sender).toBe(sender.uniqueName);
    expect(m.body).toEqual([7, "hello"]);
    expect((await listener.callBus("ListNames", "", [], T)).signature).toBe("as");
  });

  test("a named service answers calls; a failing handler's error reaches the caller", async () => {
    const [service, client] = [await connect(), await connect()];
    const owned = await service.callBus("RequestName", "su", ["org.example.Echo", 4], T);
    expect(owned.body[0]).toBe(1); // primary owner
    service.handleCalls(async (call) => {
      if (call.member === "Echo") return { signature: call.signature, body: call.body };
      throw new DBusError("org.example.Error.Nope", `no ${call.member}`);
    });
    const where = { destination: "org.example.Echo", path: "/", interface: "org.example.Echo" };
    const echoed = await client.call(
      { ...where, member: "Echo", signature: "a{sv}", body: [[]] },
      T,
    );
    expect(echoed.body).toEqual([[]]);
    const err = await client.call({ ...where, member: "Other" }, T).catch((e) => e);
    expect(err).toMatchObject({
      errorName: "org.example.Error.Nope",
      message: "org.example.Error.Nope: no Other",
    });
  });

  test("a call with no reply fails at its deadline, and an aborted call at once", async () => {
    const clock = new FakeClock();
    const [service, client] = [await connect(), await connect(clock)];
    await service.callBus("RequestName", "su", ["org.example.Silent", 4], T);
    service.handleCalls(() => new Promise(() => {}));
    const where = { destination: "org.example.Silent", path: "/", member: "Wait" };
    const late = client.call(where, { timeoutMs: 2_000 }).catch((e) => e);
    const ac = new AbortController();
    const aborted = client.call(where, { timeoutMs: 60_000, signal: ac.signal }).catch((e) => e);
    ac.abort(new Error("stopping"));
    expect((await aborted).message).toBe("stopping");
    clock.step(1_999);
    clock.step(1);
    expect((await late).message).toContain(
      ".Wait on / of org.example.Silent had no reply within 2000 ms",
    );
    expect(clock.pending).toBe(0);
  });

  test("close() rejects pending calls and settles closed", async () => {
    const [service, client] = [await connect(), await connect()];
    await service.callBus("RequestName", "su", ["org.example.Closing", 4], T);
    service.handleCalls(() => new Promise(() => {}));
    const pending = client.call(
      { destination: "org.example.Closing", path: "/", member: "Wait" },
      T,
    );
    client.close();
    await expect(pending).rejects.toThrow("closed");
    expect(await client.closed).toBeUndefined();
    await expect(client.callBus("ListNames", "", [], T)).rejects.toThrow("closed");
  });
});

describe("D-Bus authentication and hostile peers (no root)", () => {
  let dir: string;
  const servers: net.Server[] = [];
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "fleetlet-dbus-peer-"));
  });
  afterAll(() => {
    for (const s of servers) s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A peer that answers the AUTH line with `reply` and then sends `after`. */
  async function peer(name: string, reply: string, after = new Uint8Array(0)): Promise<string> {
    const path = join(dir, name);
    const server = net.createServer((s) => {
      s.once("data", () => s.write(Buffer.concat([Buffer.from(reply), after])));
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(path, r));
    return path;
  }

  test("the AUTH line names the uid as hex of its digits", () => {
    expect(authLine(1000)).toBe("AUTH EXTERNAL 31303030\r\n");
    expect(authLine(0)).toBe("AUTH EXTERNAL 30\r\n");
    expect(parseAuthReply("OK 0123456789abcdef0123456789abcdef")).toBe(
      "0123456789abcdef0123456789abcdef",
    );
  });

  test("a peer that refuses authentication fails the connect with what it said", async () => {
    const path = await peer("refuse", "REJECTED EXTERNAL\r\n");
    const err = await connectDBus({ path, bus: false, clock: realClock, timeoutMs: 5_000 }).catch(
      (e) => e,
    );
    expect(err.message).toBe(
      'D-Bus authentication as EXTERNAL failed: the peer said "REJECTED EXTERNAL"',
    );
  });

  test("a peer that never answers fails the connect at its deadline", async () => {
    const clock = new FakeClock();
    const path = await peer("mute", "");
    const pending = connectDBus({ path, bus: false, clock, timeoutMs: 3_000 }).catch((e) => e);
    clock.step(3_000);
    expect((await pending).message).toContain("not ready within 3000 ms");
  });

  test("a peer that sends an invalid message ends the connection, naming why", async () => {
    const garbage = new Uint8Array([0x6c, 4, 0, 2, ...new Array(12).fill(0)]);
    const path = await peer("garbage", "OK 0123456789abcdef0123456789abcdef\r\n", garbage);
    const conn = await connectDBus({ path, bus: false, clock: realClock, timeoutMs: 5_000 });
    expect((await conn.closed)?.message).toBe(
      "D-Bus peer sent an invalid message: protocol version 2 is not 1",
    );
  });

  test("a peer that talks past the longest auth line fails the connect", async () => {
    const path = await peer("chatty", "x".repeat(600));
    const err = await connectDBus({ path, bus: false, clock: realClock, timeoutMs: 5_000 }).catch(
      (e) => e,
    );
    expect(err.message).toBe("D-Bus peer sent a line over 512 bytes");
  });

  test("a message longer than the connection's limit ends it from its first 16 bytes", async () => {
    // a signal that says its body has 1 MiB; only its first 16 bytes are ever sent
    const start = new Uint8Array([0x6c, 4, 0, 1, 0, 0, 0x10, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
    const path = await peer("huge", "OK 0123456789abcdef0123456789abcdef\r\n", start);
    const conn = await connectDBus({
      path,
      bus: false,
      clock: realClock,
      timeoutMs: 5_000,
      maxMessageBytes: 65_536,
    });
    expect((await conn.closed)?.message).toBe(
      "D-Bus peer sent an invalid message: message of 1048592 bytes is longer than the limit 65536",
    );
  });

  test("a missing socket fails the connect naming its path", async () => {
    const path = join(dir, "none");
    const err = await connectDBus({ path, bus: false, clock: realClock, timeoutMs: 5_000 }).catch(
      (e) => e,
    );
    expect(err.message).toContain(`Cannot connect to D-Bus at ${path}`);
  });
});
