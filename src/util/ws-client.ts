// A WebSocket client (RFC 6455) over node:net or node:tls, for what Bun's own client cannot do:
// a unix socket (the agent's local API), and backpressure both ways — reading can be paused
// while what was read waits (flow control of streams), and send() says when the socket's buffer
// is full (wait for drain). Used for the runtime's streaming server (exec, port-forward), the
// CLI's interactive exec and port-forward, and their tests.
import { createHash, randomBytes } from "node:crypto";
import net from "node:net";
import tls from "node:tls";

export interface WsOptions {
  /** ws://, wss://, http:// or https:// (the request's host and path). */
  url: string;
  /** Connect to this unix socket instead of the URL's host and port. */
  unixPath?: string;
  protocols?: string[];
  headers?: Record<string, string>;
  /** PEM CA for wss:// (else the system's roots). */
  ca?: string;
  /** Handshake deadline, ms (10 s). */
  timeoutMs?: number;
}

/** The server answered the upgrade with something else than 101: its status and body. */
export class WsHandshakeError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super(`the server refused the WebSocket upgrade: HTTP ${status}: ${body.slice(0, 300)}`);
    this.name = "WsHandshakeError";
  }
}

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
const OP = { continuation: 0, text: 1, binary: 2, close: 8, ping: 9, pong: 10 } as const;

export interface WsClient {
  /** The subprotocol the server chose ("" for none). */
  readonly protocol: string;
  /** Sends a binary (Uint8Array) or text frame; false when the socket's buffer is full. */
  send(data: Uint8Array | string): boolean;
  onMessage(fn: (data: Uint8Array, text: boolean) => void): void;
  /** Called once when the connection ended (code 1006 when it broke without a close frame). */
  onClose(fn: (code: number, reason: string) => void): void;
  /** The send buffer drained after send() returned false. */
  onDrain(fn: () => void): void;
  /** Stops reading (the peer's sends back up in TCP), until resume(). */
  pause(): void;
  resume(): void;
  close(code?: number, reason?: string): void;
}

function mask(payload: Uint8Array, key: Uint8Array): Buffer {
  const out = Buffer.from(payload);
  const n = out.length;
  const k = new DataView(key.buffer, key.byteOffset, 4).getUint32(0, true);
  const words = Math.floor(n / 4);
  if (out.byteOffset % 4 === 0) {
    const u32 = new Uint32Array(out.buffer, out.byteOffset, words);
    for (let i = 0; i < words; i++) u32[i] = (u32[i] as number) ^ k;
  } else {
    for (let i = 0; i < words * 4; i++) out[i] = (out[i] as number) ^ (key[i % 4] as number);
  }
  for (let i = words * 4; i < n; i++) out[i] = (out[i] as number) ^ (key[i % 4] as number);
  return out;
}

/** A client frame (always masked). */
function frame(op: number, payload: Uint8Array): Buffer {
  const len = payload.length;
  const head = len < 126 ? 2 : len < 65536 ? 4 : 10;
  const out = Buffer.allocUnsafe(head + 4 + len);
  out[0] = 0x80 | op;
  if (len < 126) out[1] = 0x80 | len;
  else if (len < 65536) {
    out[1] = 0x80 | 126;
    out.writeUInt16BE(len, 2);
  } else {
    out[1] = 0x80 | 127;
    out.writeBigUInt64BE(BigInt(len), 2);
  }
  const key = randomBytes(4);
  key.copy(out, head);
  mask(payload, key).copy(out, head + 4);
  return out;
}

/** Parses server frames out of a byte stream. */
class FrameReader {
  private buf: Buffer = Buffer.alloc(0);
  private parts: Buffer[] = [];
  private partOp = 0;

  constructor(
    private readonly deliver: (op: number, payload: Buffer) => void,
    private readonly fail: (reason: string) => void,
  ) {}

  push(chunk: Buffer): void {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    for (;;) {
      if (this.buf.length < 2) return;
      const b0 = this.buf[0] as number;
      const b1 = this.buf[1] as number;
      let len = b1 & 0x7f;
      let at = 2;
      if (len === 126) {
        if (this.buf.length < 4) return;
        len = this.buf.readUInt16BE(2);
        at = 4;
      } else if (len === 127) {
        if (this.buf.length < 10) return;
        len = Number(this.buf.readBigUInt64BE(2));
        at = 10;
      }
      if (b1 & 0x80) {
        this.fail("the server masked a frame");
        return;
      }
      if (this.buf.length < at + len) return;
      const payload = this.buf.subarray(at, at + len);
      this.buf = this.buf.subarray(at + len);
      this.frame(b0 & 0x80, b0 & 0x0f, payload);
    }
  }

  private frame(fin: number, op: number, payload: Buffer): void {
    if (op >= 8) {
      this.deliver(op, payload);
      return;
    }
    if (op !== OP.continuation) this.partOp = op;
    if (!fin) {
      this.parts.push(Buffer.from(payload));
      return;
    }
    const whole = this.parts.length === 0 ? payload : Buffer.concat([...this.parts, payload]);
    this.parts = [];
    this.deliver(this.partOp, whole);
  }
}

function connectSocket(u: URL, o: WsOptions): net.Socket {
  const secure = u.protocol === "wss:" || u.protocol === "https:";
  const port = Number(u.port || (secure ? 443 : 80));
  const host = u.hostname.replace(/^\[|\]$/g, "");
  if (o.unixPath !== undefined) return net.connect({ path: o.unixPath });
  if (secure)
    return tls.connect({
      host,
      port,
      servername: net.isIP(host) === 0 ? host : undefined,
      ...(o.ca !== undefined && { ca: o.ca }),
    });
  return net.connect({ host, port });
}

function request(u: URL, key: string, o: WsOptions): string {
  const lines = [
    `GET ${u.pathname}${u.search} HTTP/1.1`,
    `Host: ${u.host || "localhost"}`,
    "Upgrade: websocket",
    "Connection: Upgrade",
    `Sec-WebSocket-Key: ${key}`,
    "Sec-WebSocket-Version: 13",
  ];
  if (o.protocols !== undefined && o.protocols.length > 0)
    lines.push(`Sec-WebSocket-Protocol: ${o.protocols.join(", ")}`);
  for (const [k, v] of Object.entries(o.headers ?? {})) lines.push(`${k}: ${v}`);
  return `${lines.join("\r\n")}\r\n\r\n`;
}

/** The server's answer to the upgrade, once its head is read. */
interface Answer {
  status: number;
  header(name: string): string;
  /** What came after the head. */
  rest: Buffer;
}

/** Reads the head of the server's answer; resolves once it is complete. */
function readAnswer(socket: net.Socket): Promise<Answer> {
  return new Promise((resolve) => {
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      socket.off("data", onData);
      const text = head.subarray(0, end).toString("latin1");
      resolve({
        status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1] ?? 0),
        header: (name) => new RegExp(`^${name}:\\s*(.*)$`, "im").exec(text)?.[1]?.trim() ?? "",
        rest: head.subarray(end + 4),
      });
    };
    socket.on("data", onData);
  });
}

/** The body of a refusal: what the socket says until it ends (or Content-Length is read). */
function refusal(socket: net.Socket, a: Answer): Promise<WsHandshakeError> {
  return new Promise((resolve) => {
    let body = a.rest.toString();
    const length = Number(a.header("content-length") || -1);
    const done = () => resolve(new WsHandshakeError(a.status, body));
    if (length >= 0 && Buffer.byteLength(body) >= length) {
      socket.destroy();
      done();
      return;
    }
    socket.on("data", (c: Buffer) => {
      body += c.toString();
    });
    socket.once("close", done);
  });
}

/** Opens a WebSocket; rejects with WsHandshakeError when the server answers otherwise. */
export async function connectWebSocket(o: WsOptions): Promise<WsClient> {
  const u = new URL(o.url);
  const key = randomBytes(16).toString("base64");
  const socket = connectSocket(u, o);
  const secure = o.unixPath === undefined && (u.protocol === "wss:" || u.protocol === "https:");
  const limit = o.timeoutMs ?? 10_000;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const failed = new Promise<never>((_, reject) => {
    socket.once("error", (err) =>
      reject(new Error(`cannot connect to ${o.unixPath ?? o.url}: ${err.message}`)),
    );
    timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no WebSocket answer from ${o.url} within ${limit} ms`));
    }, limit);
  });
  failed.catch(() => {});
  socket.once(secure ? "secureConnect" : "connect", () => socket.write(request(u, key, o)));
  try {
    const a = await Promise.race([readAnswer(socket), failed]);
    if (a.status !== 101) throw await Promise.race([refusal(socket, a), failed]);
    const accept = createHash("sha1")
      .update(key + GUID)
      .digest("base64");
    if (a.header("sec-websocket-accept") !== accept) {
      socket.destroy();
      throw new Error(`${o.url} answered the upgrade with a wrong Sec-WebSocket-Accept`);
    }
    socket.removeAllListeners("error");
    return new WsConnection(socket, a.header("sec-websocket-protocol"), a.rest);
  } finally {
    clearTimeout(timer);
  }
}

/** An open connection (the WsClient the caller gets). */
class WsConnection implements WsClient {
  /** Messages that arrive before the caller listens wait for it. */
  private readonly early: [Uint8Array, boolean][] = [];
  private listener: ((d: Uint8Array, text: boolean) => void) | undefined;
  private closeListener: (code: number, reason: string) => void = () => {};
  private drainListener: () => void = () => {};
  private closed = false;
  private closeCode = 1006;
  private closeReason = "";

  constructor(
    private readonly socket: net.Socket,
    readonly protocol: string,
    rest: Buffer,
  ) {
    const reader = new FrameReader(
      (op, payload) => this.received(op, payload),
      (reason) => {
        this.closeReason = reason;
        socket.destroy();
      },
    );
    socket.on("data", (c: Buffer) => reader.push(c));
    socket.on("drain", () => this.drainListener());
    socket.on("close", () => {
      if (this.closed) return;
      this.closed = true;
      this.closeListener(this.closeCode, this.closeReason);
    });
    socket.on("error", (err) => {
      this.closeReason ||= err.message;
    });
    if (rest.length > 0) reader.push(rest);
  }

  private received(op: number, payload: Buffer): void {
    if (op === OP.ping) this.socket.write(frame(OP.pong, payload));
    else if (op === OP.text || op === OP.binary) {
      if (this.listener === undefined) this.early.push([payload, op === OP.text]);
      else this.listener(payload, op === OP.text);
    } else if (op === OP.close) {
      this.closeCode = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
      this.closeReason = payload.subarray(2).toString();
      this.socket.end(frame(OP.close, payload.subarray(0, 2)));
    }
  }

  send(data: Uint8Array | string): boolean {
    if (this.closed) return false;
    const bytes = typeof data === "string" ? Buffer.from(data) : data;
    return this.socket.write(frame(typeof data === "string" ? OP.text : OP.binary, bytes));
  }

  onMessage(fn: (data: Uint8Array, text: boolean) => void): void {
    this.listener = fn;
    for (const [d, t] of this.early.splice(0)) fn(d, t);
  }

  onClose(fn: (code: number, reason: string) => void): void {
    this.closeListener = fn;
  }

  onDrain(fn: () => void): void {
    this.drainListener = fn;
  }

  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    this.socket.resume();
  }

  close(code = 1000, reason = ""): void {
    if (this.closed || this.socket.destroyed) return;
    const payload = Buffer.alloc(2 + Buffer.byteLength(reason));
    payload.writeUInt16BE(code, 0);
    payload.write(reason, 2);
    this.closeCode = code;
    this.closeReason = reason;
    this.socket.end(frame(OP.close, payload));
    setTimeout(() => this.socket.destroy(), 1000).unref?.();
  }
}
