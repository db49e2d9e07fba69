// An exec (or an attach: the same protocol) on the runtime's streaming server over SPDY/3.1 (an
// HTTP upgrade; the remote-command protocol v4.channel.k8s.io): one SPDY stream per channel
// (error, stdin, stdout, stderr, resize). Used where the WebSocket protocol falls short: it cannot end a command's stdin while
// reading its output, and SPDY can (a FIN on the stdin stream), so `echo x | kubectl exec -i pod
// -- cat` ends. Reading pauses while what was read waits to be sent on (flow control).
import net from "node:net";
import {
  HeaderDeflater,
  HeaderInflater,
  SPDY,
  type SpdyFrame,
  SpdyReader,
  spdyFrames,
} from "../../streams/spdy.ts";
import type { RuntimeChannels } from "./runtime-channels.ts";

const CHANNELS = { error: 3, stdin: 0, stdout: 1, stderr: 2, resize: 4 } as const;
type StreamType = keyof typeof CHANNELS;

/** Which streams to open (the runtime waits for exactly the ones its exec expects). */
export interface SpdyExecStreams {
  stdin: boolean;
  stdout: boolean;
  stderr: boolean;
  tty: boolean;
}

function upgradeRequest(u: URL): string {
  return [
    `POST ${u.pathname}${u.search} HTTP/1.1`,
    `Host: ${u.host}`,
    "Connection: Upgrade",
    "Upgrade: SPDY/3.1",
    "X-Stream-Protocol-Version: v4.channel.k8s.io",
    "Content-Length: 0",
    "",
    "",
  ].join("\r\n");
}

/** Upgrades a connection to `url`; resolves with the bytes that followed the 101 answer. */
function upgrade(socket: net.Socket, u: URL): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let head = Buffer.alloc(0);
    const timer = setTimeout(
      () => reject(new Error(`no SPDY upgrade from ${u.href} within 10 s`)),
      10_000,
    );
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      clearTimeout(timer);
      socket.off("data", onData);
      const status = /^HTTP\/1\.1 (\d{3})/.exec(head.subarray(0, end).toString("latin1"))?.[1];
      if (status !== "101") {
        socket.destroy();
        reject(
          new Error(
            `the runtime refused the exec upgrade: ${head
              .subarray(0, end + 200)
              .toString()
              .trim()}`,
          ),
        );
        return;
      }
      resolve(head.subarray(end + 4));
    };
    socket.on("data", onData);
    socket.once("error", (err) => {
      clearTimeout(timer);
      reject(new Error(`cannot reach the runtime's streaming server ${u.host}: ${err.message}`));
    });
    socket.once("connect", () => socket.write(upgradeRequest(u)));
  });
}

/** The streams an exec needs, in the order they are opened (the error stream first). */
function streamTypes(want: SpdyExecStreams): StreamType[] {
  const types: StreamType[] = ["error"];
  if (want.stdin) types.push("stdin");
  if (want.stdout) types.push("stdout");
  if (want.stderr && !want.tty) types.push("stderr");
  if (want.tty) types.push("resize");
  return types;
}

/** Output the runtime may send before the exec's output is read (onData). */
const MAX_HELD_BYTES = 1 << 20;

/** One exec's SPDY session with the runtime, once upgraded. */
export class SpdyExec implements RuntimeChannels {
  private readonly reader = new SpdyReader();
  private readonly inflater = new HeaderInflater();
  private readonly deflater = new HeaderDeflater();
  private readonly byId = new Map<number, StreamType>();
  private readonly idOf = new Map<StreamType, number>();
  private deliver: ((channel: number, data: Uint8Array) => Promise<void> | void) | undefined;
  /** Data frames read before anyone listens, and their bytes. */
  private readonly held: SpdyFrame[] = [];
  private heldBytes = 0;
  private onClosed: (code: number, reason: string) => void = () => {};
  private closed = false;
  private pending = 0;
  private replied = 0;
  /** Resolves once the runtime replied to every stream (data sent earlier would be dropped). */
  readonly ready: Promise<void>;
  private allReplied: () => void = () => {};

  constructor(
    private readonly socket: net.Socket,
    private readonly types: StreamType[],
  ) {
    this.ready = new Promise<void>((resolve, reject) => {
      this.allReplied = resolve;
      socket.once("close", () =>
        reject(new Error("the runtime closed the exec before its streams were ready")),
      );
      setTimeout(
        () => reject(new Error("the runtime did not accept the exec's streams within 10 s")),
        10_000,
      ).unref?.();
    });
    for (const [i, t] of types.entries()) {
      const id = 1 + 2 * i;
      this.byId.set(id, t);
      this.idOf.set(t, id);
      socket.write(spdyFrames.synStream(this.deflater, id, { streamtype: t }));
    }
    socket.on("data", (chunk: Buffer) => this.feed(chunk));
    socket.on("close", () => {
      if (this.closed) return;
      this.closed = true;
      this.onClosed(1000, "");
    });
  }

  /** Bytes from the runtime. Never throws (it runs in the socket's data handler, where a throw
   * would end the agent): a stream that is not SPDY/3, or a header block that cannot be read,
   * closes the session with the reason. */
  feed(chunk: Buffer): void {
    try {
      for (const f of this.reader.push(chunk)) {
        if (!f.control && this.deliver === undefined) this.hold(f);
        else this.frame(f);
      }
    } catch (err) {
      this.fail(`the runtime's SPDY stream is broken: ${(err as Error).message}`);
    }
  }

  /** Keeps a data frame until someone listens, up to MAX_HELD_BYTES. */
  private hold(f: SpdyFrame): void {
    this.heldBytes += f.data.length;
    if (this.heldBytes > MAX_HELD_BYTES) {
      throw new Error(`more than ${MAX_HELD_BYTES} bytes of output before the exec was read`);
    }
    this.held.push(f);
  }

  private fail(why: string): void {
    if (this.closed) return;
    this.closed = true;
    this.socket.destroy();
    this.onClosed(1011, why.slice(0, 120));
  }

  private frame(f: SpdyFrame): void {
    if (f.control) {
      if (f.type === SPDY.synReply) {
        this.inflater.decode(f.data.subarray(4));
        if (++this.replied === this.types.length) this.allReplied();
      } else if (f.type === SPDY.rstStream) this.socket.destroy();
      else if (f.type === SPDY.goAway) this.socket.end();
      return;
    }
    const t = this.byId.get(f.streamId);
    if (t === undefined || f.data.length === 0 || this.deliver === undefined) return;
    const r = this.deliver(CHANNELS[t], f.data);
    if (!(r instanceof Promise)) return;
    if (this.pending++ === 0) this.socket.pause();
    const settle = () => {
      if (--this.pending === 0) this.socket.resume();
    };
    r.then(settle, settle);
  }

  private write(t: StreamType, data: Uint8Array, fin = false): Promise<void> {
    const id = this.idOf.get(t);
    if (id === undefined || this.closed) return Promise.resolve();
    if (this.socket.write(spdyFrames.data(id, data, fin))) return Promise.resolve();
    return new Promise((resolve) => this.socket.once("drain", () => resolve()));
  }

  send(channel: number, data: Uint8Array): Promise<void> {
    if (channel === CHANNELS.stdin) return this.write("stdin", data);
    if (channel === CHANNELS.resize) return this.write("resize", data);
    return Promise.resolve();
  }

  onData(fn: (channel: number, data: Uint8Array) => Promise<void> | void): void {
    this.deliver = fn;
    this.heldBytes = 0;
    for (const f of this.held.splice(0)) this.frame(f);
  }

  onClose(fn: (code: number, reason: string) => void): void {
    this.onClosed = fn;
  }

  close(): void {
    this.socket.end(spdyFrames.goAway(0));
    setTimeout(() => this.socket.destroy(), 1000).unref?.();
  }

  /** The client's stdin ended: a FIN on the stdin stream. */
  endStdin(): void {
    void this.write("stdin", new Uint8Array(0), true);
  }
}

/** Opens an exec's streams on the runtime's streaming server at `url`. */
export async function openRuntimeSpdy(url: string, want: SpdyExecStreams): Promise<SpdyExec> {
  const u = new URL(url);
  const socket = net.connect({ host: u.hostname, port: Number(u.port || 80) });
  const rest = await upgrade(socket, u);
  const exec = new SpdyExec(socket, streamTypes(want));
  exec.feed(rest);
  await exec.ready;
  return exec;
}
