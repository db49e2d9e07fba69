// An exec on the runtime's streaming server over SPDY/3.1 (an HTTP upgrade; the remote-command
// protocol v4.channel.k8s.io): one SPDY stream per channel (error, stdin, stdout, stderr,
// resize). Used where the WebSocket protocol falls short: it cannot end a command's stdin while
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

/** Opens an exec's streams on the runtime's streaming server at `url`. */
export async function openRuntimeSpdy(
  url: string,
  want: SpdyExecStreams,
): Promise<RuntimeChannels & { endStdin(): void }> {
  const u = new URL(url);
  const socket = net.connect({ host: u.hostname, port: Number(u.port || 80) });
  const rest = await upgrade(socket, u);
  const reader = new SpdyReader();
  const inflater = new HeaderInflater();
  const deflater = new HeaderDeflater();
  const byId = new Map<number, StreamType>();
  const idOf = new Map<StreamType, number>();
  let next = 1;
  const types: StreamType[] = ["error"];
  if (want.stdin) types.push("stdin");
  if (want.stdout) types.push("stdout");
  if (want.stderr && !want.tty) types.push("stderr");
  if (want.tty) types.push("resize");
  for (const t of types) {
    const id = next;
    next += 2;
    byId.set(id, t);
    idOf.set(t, id);
    socket.write(spdyFrames.synStream(deflater, id, { streamtype: t }));
  }
  let deliver: (channel: number, data: Uint8Array) => Promise<void> | void = () => {};
  let onClosed: (code: number, reason: string) => void = () => {};
  let closed = false;
  let pending = 0;
  let replied = 0;
  let allReplied: () => void = () => {};
  const ready = new Promise<void>((resolve, reject) => {
    allReplied = resolve;
    socket.once("close", () =>
      reject(new Error("the runtime closed the exec before its streams were ready")),
    );
    setTimeout(
      () => reject(new Error("the runtime did not accept the exec's streams within 10 s")),
      10_000,
    ).unref?.();
  });
  const frame = (f: SpdyFrame) => {
    if (f.control) {
      if (f.type === SPDY.synReply) {
        inflater.decode(f.data.subarray(4));
        if (++replied === types.length) allReplied();
      } else if (f.type === SPDY.rstStream) socket.destroy();
      else if (f.type === SPDY.goAway) socket.end();
      return;
    }
    const t = byId.get(f.streamId);
    if (t === undefined || f.data.length === 0) return;
    const r = deliver(CHANNELS[t], f.data);
    if (!(r instanceof Promise)) return;
    if (pending++ === 0) socket.pause();
    const settle = () => {
      if (--pending === 0) socket.resume();
    };
    r.then(settle, settle);
  };
  // Frames are read at once (the replies), but data waits for a listener.
  let deliverReady = false;
  const held: SpdyFrame[] = [];
  const route = (f: SpdyFrame) => {
    if (!f.control && !deliverReady) held.push(f);
    else frame(f);
  };
  const feedAll = (chunk: Buffer) => {
    for (const f of reader.push(chunk)) route(f);
  };
  socket.on("data", feedAll);
  feedAll(rest);
  // Data sent before the runtime replied to a stream would be dropped: wait for every reply.
  await ready;
  socket.on("close", () => {
    if (closed) return;
    closed = true;
    onClosed(1000, "");
  });
  const send = (t: StreamType, data: Uint8Array, fin = false): Promise<void> => {
    const id = idOf.get(t);
    if (id === undefined || closed) return Promise.resolve();
    if (socket.write(spdyFrames.data(id, data, fin))) return Promise.resolve();
    return new Promise((resolve) => socket.once("drain", () => resolve()));
  };
  return {
    send(channel, data) {
      if (channel === CHANNELS.stdin) return send("stdin", data);
      if (channel === CHANNELS.resize) return send("resize", data);
      return Promise.resolve();
    },
    onData(fn) {
      deliver = fn;
      deliverReady = true;
      for (const f of held.splice(0)) frame(f);
    },
    onClose(fn) {
      onClosed = fn;
    },
    close() {
      socket.end(spdyFrames.goAway(0));
      setTimeout(() => socket.destroy(), 1000).unref?.();
    },
    endStdin() {
      void send("stdin", new Uint8Array(0), true);
    },
  };
}
