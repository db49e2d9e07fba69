// A raw HTTP/2 peer for tests: it writes exactly the frames a test names, and reads the other
// side's frames as they are, so that a test of our HTTP/2 stack sees what a real peer (or a
// hostile one) would send, not what an HTTP/2 library chooses to (Bun's node:http2 server, for
// one, answers a refused stream with DATA and END_STREAM and never sends RST_STREAM). Header
// blocks are encoded with literals and the static table only (no dynamic table), which every
// decoder reads.

import { expect } from "bun:test";
import type { Socket } from "bun";
import { TransportError } from "../../src/cri/grpc-wire.ts";
import { encodeHeaders } from "../../src/cri/hpack.ts";

export const T = {
  DATA: 0,
  HEADERS: 1,
  PRIORITY: 2,
  RST_STREAM: 3,
  SETTINGS: 4,
  PUSH_PROMISE: 5,
  PING: 6,
  GOAWAY: 7,
  WINDOW_UPDATE: 8,
  CONTINUATION: 9,
} as const;
export const F = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8 } as const;
export const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

export interface RawFrame {
  type: number;
  flags: number;
  id: number;
  payload: Buffer;
}

/** One frame's bytes; `length` overrides the length field (for frames that lie about it). */
export function rawFrame(
  type: number,
  flags: number,
  id: number,
  payload: Uint8Array = Buffer.alloc(0),
  length = payload.length,
): Buffer {
  const out = Buffer.alloc(9 + payload.length);
  out.writeUIntBE(length, 0, 3);
  out[3] = type;
  out[4] = flags;
  out.writeUInt32BE(id, 5);
  out.set(payload, 9);
  return out;
}

export function settingsPayload(entries: [number, number][]): Buffer {
  const p = Buffer.alloc(6 * entries.length);
  entries.forEach(([k, v], i) => {
    p.writeUInt16BE(k, 6 * i);
    p.writeUInt32BE(v, 6 * i + 2);
  });
  return p;
}

export function u32(...values: number[]): Buffer {
  const p = Buffer.alloc(4 * values.length);
  values.forEach((v, i) => {
    p.writeUInt32BE(v >>> 0, 4 * i);
  });
  return p;
}

/** A gRPC message with its 5-byte header. */
export function grpcMessage(message: Uint8Array): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(message.length, 1);
  return Buffer.concat([head, message]);
}

/** One connection of the raw peer. */
export class RawConn {
  /** Every frame received, in order. */
  readonly frames: RawFrame[] = [];
  /** The other side closed the connection (or we did). */
  closed = false;
  readonly whenClosed: Promise<void>;
  private resolveClosed!: () => void;
  private buf = Buffer.alloc(0);
  private prefaceLeft: number;
  private waiters: (() => void)[] = [];
  /** Bytes that did not fit the socket yet. */
  private backlog: Buffer[] = [];
  private drainWaiters: (() => void)[] = [];

  constructor(
    private readonly socket: Socket<unknown>,
    expectPreface: boolean,
  ) {
    this.prefaceLeft = expectPreface ? PREFACE.length : 0;
    this.whenClosed = new Promise((r) => {
      this.resolveClosed = r;
    });
  }

  /** Writes bytes as they are (kept in order while the socket is full). */
  write(bytes: Buffer): void {
    if (this.closed) return;
    if (this.backlog.length > 0) {
      this.backlog.push(bytes);
      return;
    }
    const n = this.socket.write(bytes);
    if (n < bytes.length) this.backlog.push(bytes.subarray(Math.max(0, n)));
  }

  /** Resolves once everything written has gone to the socket (false: the connection closed). */
  async flushed(): Promise<boolean> {
    while (this.backlog.length > 0 && !this.closed) {
      await new Promise<void>((r) => this.drainWaiters.push(r));
    }
    return !this.closed;
  }

  send(type: number, flags: number, id: number, payload?: Uint8Array): void {
    this.write(rawFrame(type, flags, id, payload));
  }

  settings(entries: [number, number][] = []): void {
    this.send(T.SETTINGS, 0, 0, settingsPayload(entries));
  }

  headers(id: number, fields: [string, string][], flags: number = F.END_HEADERS): void {
    this.send(T.HEADERS, flags, id, encodeHeaders(fields));
  }

  /** An OK gRPC answer of one message: headers, data, trailers. */
  answer(id: number, message: Uint8Array): void {
    this.headers(id, [
      [":status", "200"],
      ["content-type", "application/grpc"],
    ]);
    this.send(T.DATA, 0, id, grpcMessage(message));
    this.headers(id, [["grpc-status", "0"]], F.END_HEADERS | F.END_STREAM);
  }

  /** Waits for a frame that `match` accepts (looking at those received already first). */
  async frame(match: (f: RawFrame) => boolean, timeoutMs = 5000): Promise<RawFrame> {
    const until = Date.now() + timeoutMs;
    let seen = 0;
    for (;;) {
      for (; seen < this.frames.length; seen++) {
        const f = this.frames[seen] as RawFrame;
        if (match(f)) return f;
      }
      if (this.closed) throw new Error("the connection closed before the frame came");
      const left = until - Date.now();
      if (left <= 0) throw new Error("no such frame in time");
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  /** The first request's HEADERS (a client's stream). */
  request(timeoutMs?: number): Promise<RawFrame> {
    return this.frame((f) => f.type === T.HEADERS, timeoutMs);
  }

  /** The GOAWAY the other side sent, if any: its last stream and error code. */
  goaway(): { lastId: number; code: number } | undefined {
    const f = this.frames.find((x) => x.type === T.GOAWAY);
    if (f === undefined) return undefined;
    return { lastId: f.payload.readUInt32BE(0), code: f.payload.readUInt32BE(4) };
  }

  close(): void {
    this.socket.terminate();
    this.onClose();
  }

  /** @internal */
  onData(chunk: Buffer): void {
    let buf = this.buf.length > 0 ? Buffer.concat([this.buf, chunk]) : chunk;
    if (this.prefaceLeft > 0) {
      const n = Math.min(this.prefaceLeft, buf.length);
      this.prefaceLeft -= n;
      buf = buf.subarray(n);
    }
    while (buf.length >= 9) {
      const length = buf.readUIntBE(0, 3);
      if (buf.length < 9 + length) break;
      this.frames.push({
        type: buf[3] as number,
        flags: buf[4] as number,
        id: buf.readUInt32BE(5) & 0x7fffffff,
        payload: Buffer.from(buf.subarray(9, 9 + length)),
      });
      buf = buf.subarray(9 + length);
    }
    this.buf = Buffer.from(buf);
    this.wake();
  }

  /** @internal */
  onDrain(): void {
    while (this.backlog.length > 0) {
      const b = this.backlog[0] as Buffer;
      const n = this.socket.write(b);
      if (n < b.length) {
        this.backlog[0] = b.subarray(Math.max(0, n));
        return;
      }
      this.backlog.shift();
    }
    for (const w of this.drainWaiters.splice(0)) w();
  }

  /** @internal */
  onClose(): void {
    if (this.closed) return;
    this.closed = true;
    this.backlog = [];
    this.resolveClosed();
    this.wake();
    for (const w of this.drainWaiters.splice(0)) w();
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }
}

const handlers = (expectPreface: boolean, onConn: (c: RawConn) => void) => ({
  open(s: Socket<RawConn | undefined>) {
    const c = new RawConn(s as Socket<unknown>, expectPreface);
    s.data = c;
    onConn(c);
  },
  data: (s: Socket<RawConn | undefined>, chunk: Buffer) => s.data?.onData(Buffer.from(chunk)),
  drain: (s: Socket<RawConn | undefined>) => s.data?.onDrain(),
  close: (s: Socket<RawConn | undefined>) => s.data?.onClose(),
  error: (s: Socket<RawConn | undefined>) => s.data?.onClose(),
});

export interface RawServer {
  /** The TCP port (0 on a unix socket). */
  port: number;
  /** Connections accepted so far. */
  connections: RawConn[];
  stop(): void;
}

/** A raw server: each connection (after the client's preface) is handed to `serve`. */
export function rawServer(
  where: { unix: string } | { hostname: string },
  serve: (c: RawConn) => void | Promise<void>,
): RawServer {
  const connections: RawConn[] = [];
  const onConn = (c: RawConn) => {
    connections.push(c);
    Promise.resolve(serve(c)).catch(() => c.close());
  };
  const socket = handlers(true, onConn);
  let port = 0;
  let stopListening: () => void;
  if ("unix" in where) {
    const l = Bun.listen<RawConn | undefined>({ unix: where.unix, socket });
    stopListening = () => l.stop(true);
  } else {
    const l = Bun.listen<RawConn | undefined>({ hostname: where.hostname, port: 0, socket });
    port = l.port;
    stopListening = () => l.stop(true);
  }
  return {
    port,
    connections,
    stop() {
      for (const c of connections) c.close();
      stopListening();
    },
  };
}

/** A raw client connected to a unix socket, its preface (and empty SETTINGS) sent. */
export async function rawClient(unix: string): Promise<RawConn> {
  let conn: RawConn | undefined;
  await Bun.connect<RawConn | undefined>({
    unix,
    socket: handlers(false, (c) => {
      conn = c;
    }),
  });
  const c = conn as RawConn;
  c.write(PREFACE);
  c.settings();
  return c;
}

// Flow control from the raw peer's side, for tests that move more than a window each way: the
// peer sends DATA only within the windows the other side gave it (SETTINGS_INITIAL_WINDOW_SIZE,
// SETTINGS_MAX_FRAME_SIZE and WINDOW_UPDATEs, as received so far), and gives back what it reads
// with WINDOW_UPDATEs, as a peer with the default 65,535-byte windows does.

/** DATA bytes each connection sent with sendData(), in all and by stream. */
const sentData = new WeakMap<RawConn, { total: number; byStream: Map<number, number> }>();
/** DATA bytes each connection read with readBody(), and the bytes it gave back for them. */
const readData = new WeakMap<RawConn, { received: number; granted: number }>();

/** What the other side lets `c` send now: on stream `id`, on the connection, in one frame. Only
 * DATA sent with sendData() is counted against the windows. */
function sendWindows(
  c: RawConn,
  id: number,
): { stream: number; connection: number; frame: number } {
  let initial = 65_535;
  let maxFrame = 16_384;
  let streamGrants = 0;
  let connectionGrants = 0;
  for (const f of c.frames) {
    if (f.type === T.SETTINGS && f.id === 0 && !(f.flags & F.ACK)) {
      for (let at = 0; at + 6 <= f.payload.length; at += 6) {
        const key = f.payload.readUInt16BE(at);
        const value = f.payload.readUInt32BE(at + 2);
        if (key === 4) initial = value;
        if (key === 5) maxFrame = value;
      }
    } else if (f.type === T.WINDOW_UPDATE && f.payload.length === 4) {
      const increment = f.payload.readUInt32BE(0) & 0x7fffffff;
      if (f.id === 0) connectionGrants += increment;
      else if (f.id === id) streamGrants += increment;
    }
  }
  const sent = sentData.get(c);
  return {
    stream: initial + streamGrants - (sent?.byStream.get(id) ?? 0),
    connection: 65_535 + connectionGrants - (sent?.total ?? 0),
    frame: maxFrame,
  };
}

/** Resolves at the next frame `c` receives (rejects when the connection closes first). */
async function nextFrame(c: RawConn, timeoutMs: number): Promise<void> {
  const known = c.frames.length;
  let index = 0;
  await c.frame(() => index++ >= known, timeoutMs);
}

/** Sends `bytes` on stream `id` as DATA frames within the other side's windows, waiting for its
 * WINDOW_UPDATEs as needed; `end`: END_STREAM on the last frame (one empty frame for no bytes). */
export async function sendData(
  c: RawConn,
  id: number,
  bytes: Uint8Array,
  end = false,
  timeoutMs = 5000,
): Promise<void> {
  let sent = sentData.get(c);
  if (sent === undefined) {
    sent = { total: 0, byStream: new Map() };
    sentData.set(c, sent);
  }
  let at = 0;
  do {
    const w = sendWindows(c, id);
    const n = Math.min(bytes.length - at, w.stream, w.connection, w.frame);
    if (n <= 0 && at < bytes.length) {
      await nextFrame(c, timeoutMs);
      continue;
    }
    const last = at + n === bytes.length;
    c.send(T.DATA, last && end ? F.END_STREAM : 0, id, bytes.subarray(at, at + n));
    sent.total += n;
    sent.byStream.set(id, (sent.byStream.get(id) ?? 0) + n);
    at += n;
    if (!(await c.flushed())) throw new Error(`the connection closed while sending stream ${id}`);
  } while (at < bytes.length);
}

/** Reads stream `id`'s DATA until END_STREAM and returns it, giving back each frame's bytes with
 * WINDOW_UPDATEs (on the connection, and on the stream until it ends). Throws when the other
 * side sent past the `window` we gave it (our SETTINGS_INITIAL_WINDOW_SIZE, and the connection's
 * 65,535 bytes) or reset the stream. */
export async function readBody(
  c: RawConn,
  id: number,
  window = 65_535,
  timeoutMs = 5000,
): Promise<Buffer> {
  let conn = readData.get(c);
  if (conn === undefined) {
    conn = { received: 0, granted: 0 };
    readData.set(c, conn);
  }
  const chunks: Buffer[] = [];
  let received = 0;
  let granted = 0;
  let from = 0;
  for (;;) {
    let index = 0;
    const f = await c.frame(
      (x) => index++ >= from && x.id === id && (x.type === T.DATA || x.type === T.RST_STREAM),
      timeoutMs,
    );
    from = c.frames.indexOf(f, from) + 1;
    if (f.type === T.RST_STREAM) {
      throw new Error(`stream ${id} was reset (code ${f.payload.readUInt32BE(0)})`);
    }
    const n = f.payload.length;
    received += n;
    conn.received += n;
    if (received > window + granted) {
      throw new Error(`stream ${id} got ${received} bytes, past its window (${window + granted})`);
    }
    if (conn.received > 65_535 + conn.granted) {
      throw new Error(`the connection got ${conn.received} bytes, past its window`);
    }
    chunks.push(f.payload);
    const end = (f.flags & F.END_STREAM) !== 0;
    if (n > 0) {
      c.send(T.WINDOW_UPDATE, 0, 0, u32(n));
      conn.granted += n;
      if (!end) {
        c.send(T.WINDOW_UPDATE, 0, id, u32(n));
        granted += n;
      }
    }
    if (end) return Buffer.concat(chunks);
  }
}

/** The TransportError a call that must fail rejects with. */
export async function callFailure(p: Promise<unknown>): Promise<TransportError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(TransportError);
    return err as TransportError;
  }
  throw new Error("the call succeeded");
}
