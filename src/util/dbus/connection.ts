// A D-Bus connection over a unix socket: the message bus (/run/dbus/system_bus_socket, which
// wants Hello) or systemd's private socket (/run/systemd/private, which does not). Method calls
// get their replies by serial, each under a deadline and an optional AbortSignal; an error reply
// rejects with a DBusError carrying the peer's error name and text. Signals go to the handlers
// that asked for them; incoming method calls go to one handler (a service, as test fakes are).
//
// Invariants: every entry of `pending` has a live timer and is settled exactly once (by its
// reply, its deadline, its signal or the connection's end); once the connection has ended,
// `pending` is empty and every call rejects at once. An invalid message from the peer ends the
// connection, since the stream cannot be read past it.
import net from "node:net";
import { abortReason, type Clock } from "../clock.ts";
import { MessageFramer } from "./framer.ts";
import { encodeMessage, type Message, NO_REPLY_EXPECTED } from "./message.ts";
import { authenticate } from "./sasl.ts";
import type { DBusValue } from "./types.ts";

/** An error reply from the peer; callers branch on `errorName`
 * (e.g. "org.freedesktop.systemd1.NoSuchUnit"). */
export class DBusError extends Error {
  override name = "DBusError";
  constructor(
    readonly errorName: string,
    text: string,
  ) {
    super(`${errorName}: ${text}`);
  }
}

export interface MethodCall {
  destination?: string;
  path: string;
  interface?: string;
  member: string;
  /** The body's signature; "" or absent for none. */
  signature?: string;
  body?: DBusValue[];
}

export interface CallOptions {
  /** The call fails if no reply came within this many milliseconds. */
  timeoutMs: number;
  signal?: AbortSignal;
}

/** What a call handler answers: a reply body, or a DBusError to send as an error reply. */
export type CallHandler = (call: Message) => Promise<{ signature: string; body: DBusValue[] }>;

interface Pending {
  resolve(m: Message): void;
  reject(e: unknown): void;
  /** Cancels the deadline's timer and the abort listener. */
  cleanup(): void;
}

const BUS = {
  destination: "org.freedesktop.DBus",
  path: "/org/freedesktop/DBus",
  interface: "org.freedesktop.DBus",
};

export class DBusConnection {
  /** Calls sent and not yet answered, by serial. */
  private readonly pending = new Map<number, Pending>();
  /** Handlers of incoming signals. */
  private readonly signalHandlers = new Set<(m: Message) => void>();
  /** The handler of incoming method calls; none answers UnknownMethod. */
  private callHandler: CallHandler | undefined;
  /** The serial of the last message sent (1 … 2^32-1, then around again). */
  private serial = 0;
  /** Why the connection ended; undefined while it is open. */
  private ended: Error | undefined;
  private readonly framer: MessageFramer;
  /** The name the bus gave us (":1.42"); undefined on a peer-to-peer connection. */
  uniqueName: string | undefined;
  /** Settles when the connection ends, with the reason (undefined after close()). */
  readonly closed: Promise<Error | undefined>;
  private markClosed!: (e: Error | undefined) => void;

  constructor(
    private readonly socket: net.Socket,
    private readonly clock: Clock,
    maxMessageBytes?: number,
  ) {
    this.framer = new MessageFramer(maxMessageBytes);
    this.closed = new Promise((r) => {
      this.markClosed = r;
    });
    socket.on("data", (chunk: Buffer) => this.receive(new Uint8Array(chunk)));
    socket.on("error", (e) => this.end(new Error(`D-Bus connection failed: ${e.message}`)));
    socket.on("close", () => this.end(new Error("D-Bus peer closed the connection")));
  }

  /** Feeds bytes from the peer (also the bytes that followed authentication). */
  receive(chunk: Uint8Array): void {
    if (this.ended !== undefined) return;
    let messages: Message[];
    try {
      messages = this.framer.push(chunk);
    } catch (e) {
      this.end(new Error(`D-Bus peer sent an invalid message: ${(e as Error).message}`));
      return;
    }
    for (const m of messages) this.dispatch(m);
  }

  private dispatch(m: Message): void {
    if (m.kind === "return" || m.kind === "error") {
      const p = this.pending.get(m.replySerial ?? 0);
      if (p === undefined) return;
      this.pending.delete(m.replySerial ?? 0);
      p.cleanup();
      if (m.kind === "return") p.resolve(m);
      else
        p.reject(new DBusError(m.errorName ?? "", typeof m.body[0] === "string" ? m.body[0] : ""));
    } else if (m.kind === "signal") {
      for (const h of this.signalHandlers) {
        try {
          h(m);
        } catch {
          // a handler's own failure must not end the connection or reach the socket's events
        }
      }
    } else {
      void this.answer(m);
    }
  }

  private async answer(call: Message): Promise<void> {
    const wantsReply = (call.flags & NO_REPLY_EXPECTED) === 0;
    const base = { flags: NO_REPLY_EXPECTED, replySerial: call.serial, destination: call.sender };
    try {
      if (this.callHandler === undefined) {
        throw new DBusError("org.freedesktop.DBus.Error.UnknownMethod", `no method ${call.member}`);
      }
      const reply = await this.callHandler(call);
      if (wantsReply) this.send({ ...base, kind: "return", serial: 0, ...reply });
    } catch (e) {
      const name = e instanceof DBusError ? e.errorName : "org.freedesktop.DBus.Error.Failed";
      const text = e instanceof DBusError ? e.message.slice(name.length + 2) : String(e);
      if (wantsReply && this.ended === undefined) {
        this.send({
          ...base,
          kind: "error",
          serial: 0,
          errorName: name,
          signature: "s",
          body: [text],
        });
      }
    }
  }

  /** Sends `m` with the next serial and returns that serial; throws if the connection ended. */
  send(m: Message): number {
    if (this.ended !== undefined) throw this.ended;
    this.serial = this.serial >= 0xffffffff ? 1 : this.serial + 1;
    this.socket.write(encodeMessage(m, this.serial));
    return this.serial;
  }

  /** Calls a method and resolves with the reply; rejects with a DBusError for an error reply,
   * or an Error naming the call when the deadline passes, `signal` aborts or the connection
   * ends first. */
  call(c: MethodCall, opts: CallOptions): Promise<Message> {
    const what = `D-Bus call ${c.interface ?? ""}.${c.member} on ${c.path} of ${c.destination ?? "the peer"}`;
    return new Promise((resolve, reject) => {
      if (this.ended !== undefined) return reject(new Error(`${what}: ${this.ended.message}`));
      if (opts.signal?.aborted) return reject(abortReason(opts.signal));
      const serial = this.send({
        kind: "call",
        flags: 0,
        serial: 0,
        signature: "",
        body: [],
        ...c,
      });
      const fail = (e: unknown) => {
        if (this.pending.delete(serial)) {
          cleanup();
          reject(e);
        }
      };
      const onAbort = () => fail(abortReason(opts.signal as AbortSignal));
      const cancelTimer = this.clock.setTimer(opts.timeoutMs, () =>
        fail(new Error(`${what} had no reply within ${opts.timeoutMs} ms`)),
      );
      const cleanup = () => {
        cancelTimer();
        opts.signal?.removeEventListener("abort", onAbort);
      };
      opts.signal?.addEventListener("abort", onAbort);
      this.pending.set(serial, { resolve, reject: (e) => reject(e), cleanup });
    });
  }

  /** Calls `fn` for every signal received until the returned function is called; `fn` must not
   * throw (what it throws is dropped). Signals from a bus come only after a matching AddMatch
   * (see addMatch). */
  onSignal(fn: (m: Message) => void): () => void {
    this.signalHandlers.add(fn);
    return () => this.signalHandlers.delete(fn);
  }

  /** Answers incoming method calls with `fn` (one handler; a later one replaces it). */
  handleCalls(fn: CallHandler): void {
    this.callHandler = fn;
  }

  /** Asks the bus to route signals matching `rule` (e.g. "type='signal',member='JobRemoved'"). */
  async addMatch(rule: string, opts: CallOptions): Promise<void> {
    await this.call({ ...BUS, member: "AddMatch", signature: "s", body: [rule] }, opts);
  }

  /** Calls a method of the bus itself (org.freedesktop.DBus). */
  callBus(
    member: string,
    signature: string,
    body: DBusValue[],
    opts: CallOptions,
  ): Promise<Message> {
    return this.call({ ...BUS, member, signature, body }, opts);
  }

  /** Ends the connection; pending calls reject. Idempotent. */
  close(): void {
    this.end(undefined);
  }

  private end(reason: Error | undefined): void {
    if (this.ended !== undefined) return;
    this.ended = reason ?? new Error("D-Bus connection was closed");
    for (const p of this.pending.values()) {
      p.cleanup();
      p.reject(this.ended);
    }
    this.pending.clear();
    this.socket.destroy();
    this.markClosed(reason);
  }
}

export interface ConnectOptions {
  /** The unix socket's path. */
  path: string;
  /** Whether the peer is a message bus (we say Hello and get a unique name); false for a
   * peer-to-peer socket such as systemd's /run/systemd/private. */
  bus: boolean;
  clock: Clock;
  /** Deadline for connecting, authenticating and Hello together. */
  timeoutMs: number;
  /** The uid we authenticate as (default: our own). */
  uid?: number;
  /** Longest message accepted from the peer (default DEFAULT_MAX_MESSAGE_BYTES). */
  maxMessageBytes?: number;
  signal?: AbortSignal;
}

/** Connects, authenticates and (on a bus) says Hello, all within `timeoutMs`. */
export async function connectDBus(opts: ConnectOptions): Promise<DBusConnection> {
  const deadline = new AbortController();
  const cancelTimer = opts.clock.setTimer(opts.timeoutMs, () =>
    deadline.abort(
      new Error(`D-Bus connection to ${opts.path} not ready within ${opts.timeoutMs} ms`),
    ),
  );
  const signal =
    opts.signal === undefined ? deadline.signal : AbortSignal.any([deadline.signal, opts.signal]);
  const socket = net.createConnection({ path: opts.path });
  try {
    await connected(socket, opts.path, signal);
    const { rest } = await authenticate(socket, opts.uid ?? process.getuid?.() ?? 0, signal);
    const conn = new DBusConnection(socket, opts.clock, opts.maxMessageBytes);
    conn.receive(rest);
    if (opts.bus) {
      const reply = await conn.callBus("Hello", "", [], { timeoutMs: opts.timeoutMs, signal });
      conn.uniqueName = String(reply.body[0]);
    }
    return conn;
  } catch (e) {
    socket.destroy();
    throw e;
  } finally {
    cancelTimer();
  }
}

function connected(socket: net.Socket, path: string, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(abortReason(signal));
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    socket.once("connect", () => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    });
    socket.once("error", (e) => {
      signal.removeEventListener("abort", onAbort);
      reject(new Error(`Cannot connect to D-Bus at ${path}: ${e.message}`));
    });
  });
}
