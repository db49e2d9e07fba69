// Port-forward to a pod (docs/kubectl.md): a WebSocket upgrade of .../pods/NAME/portforward. kubectl
// 1.32 tunnels SPDY through it ("SPDY/3.1+portforward.k8s.io"): each forwarded TCP connection is
// a pair of SPDY streams (error, data) with the port and a request id in their headers, and
// becomes one stream to the device. A client of the channel protocol (v4.channel.k8s.io, as the
// kubelet serves it; `fleetlet port-forward`) forwards one connection per WebSocket, for the
// port in ?ports=. Each session is written to the audit log with the connections it carried.
import type { Server, ServerWebSocket } from "bun";
import { StatusError } from "../../api/status.ts";
import { pickProtocol } from "../../protocol/remotecommand.ts";
import type { StreamOpen } from "../../protocol/streams.ts";
import type { ClientSocket } from "../../streams/exec-session.ts";
import {
  HeaderDeflater,
  HeaderInflater,
  SPDY,
  type SpdyFrame,
  SpdyReader,
  spdyFrames,
} from "../../streams/spdy.ts";
import type { OpenStream, StreamWork } from "../../streams/types.ts";
import type { SocketData, SocketHandler } from "../server.ts";
import type { PodStreamDeps } from "./pod-deps.ts";

const TUNNEL = "SPDY/3.1+portforward.k8s.io";
const CHANNEL_PROTOCOLS = ["v4.channel.k8s.io", "portforward.k8s.io"];

interface PortForwardSocketData extends SocketData {
  kind: "portforward";
  protocol: string;
  node: string;
  namespace: string;
  pod: string;
  uid?: string;
  ports: number[];
  auditId: number;
  session?: { message(m: string | Uint8Array): void; drain(): void; closed(): void };
}

function parsePorts(q: URLSearchParams): number[] {
  const raw = [...q.getAll("ports"), ...q.getAll("port")].flatMap((p) => p.split(","));
  const ports = raw.map((p) => Number(p.trim()));
  if (ports.length === 0)
    throw new StatusError("BadRequest", "at least one port is required (?ports=)");
  for (const p of ports)
    if (!Number.isInteger(p) || p < 1 || p > 65535)
      throw new StatusError("BadRequest", `invalid port ${JSON.stringify(String(p))}`);
  return ports;
}

/** The upgrade of .../pods/NAME/portforward, refused with a Status before upgrading. */
export async function portForwardUpgrade(
  d: PodStreamDeps,
  req: Request,
  url: URL,
  server: Server<SocketData>,
  namespace: string,
  name: string,
) {
  d.authorize(req, url);
  const found = d.findPod(namespace, name);
  if (found === undefined)
    throw new StatusError("NotFound", `pods "${name}" not found`, { name, kind: "pods" });
  const protocol = pickProtocol(req.headers.get("sec-websocket-protocol"), [
    TUNNEL,
    ...CHANNEL_PROTOCOLS,
  ]);
  if (req.headers.get("upgrade")?.toLowerCase() !== "websocket" || protocol === undefined)
    throw new StatusError(
      "BadRequest",
      `port-forward needs a WebSocket upgrade with the subprotocol ${TUNNEL} or ${CHANNEL_PROTOCOLS.join(", ")} (the hub does not serve SPDY directly)`,
    );
  const ports =
    protocol === TUNNEL && url.searchParams.get("ports") === null
      ? []
      : parsePorts(url.searchParams);
  const auditId = await d.audit.start({
    kind: "portforward",
    user: "operator",
    client: server.requestIP(req)?.address ?? "",
    userAgent: req.headers.get("user-agent") ?? "",
    node: found.node,
    namespace,
    pod: name,
    ports,
  });
  const data: PortForwardSocketData = {
    kind: "portforward",
    protocol,
    node: found.node,
    namespace,
    pod: name,
    ...(found.pod.metadata.uid !== undefined && { uid: found.pod.metadata.uid }),
    ports,
    auditId,
  };
  return { data: data as SocketData, headers: { "Sec-WebSocket-Protocol": protocol } };
}

const forwardReq = (data: PortForwardSocketData, port: number): StreamOpen => ({
  type: "stream.open",
  kind: "portforward",
  id: 1,
  window: 0,
  namespace: data.namespace,
  pod: data.pod,
  ...(data.uid !== undefined && { uid: data.uid }),
  port,
});

/** One forwarded connection: the stream to the device and the client's side of it. */
class Forward {
  work: StreamWork | undefined;
  private early: Uint8Array[] = [];
  readonly abort = new AbortController();

  constructor(
    open: OpenStream,
    req: StreamOpen,
    write: (data: Uint8Array) => Promise<void>,
    end: (error: string | undefined) => void,
  ) {
    open(
      req,
      { write: (_c, data) => write(data), end: (r) => end(r.error?.message) },
      this.abort.signal,
    ).then(
      (w) => {
        this.work = w;
        for (const b of this.early.splice(0)) void w.input?.(0, b);
      },
      (err: Error) => end(err.message),
    );
  }

  input(data: Uint8Array): void {
    if (this.work === undefined) this.early.push(data);
    else void this.work.input?.(0, data);
  }

  stop(): void {
    this.abort.abort(new Error("the client closed the connection"));
  }
}

/** Writes to the client's socket, waiting for it to drain under backpressure. */
class Writer {
  private drains: (() => void)[] = [];
  constructor(private readonly socket: ClientSocket) {}
  write(data: Uint8Array | string): Promise<void> {
    if (this.socket.send(data) !== -1) return Promise.resolve();
    return new Promise((r) => this.drains.push(r));
  }
  drain(): void {
    for (const d of this.drains.splice(0)) d();
  }
}

interface Pair {
  port: number;
  data?: number;
  error?: number;
  forward?: Forward;
}

/** kubectl's tunneled SPDY session: stream pairs become forwards to the device. */
class SpdySession {
  private readonly reader = new SpdyReader();
  private readonly inflater = new HeaderInflater();
  private readonly deflater = new HeaderDeflater();
  private readonly writer: Writer;
  private readonly pairs = new Map<string, Pair>();
  private readonly byStream = new Map<number, { pair: Pair; type: string }>();
  connections = 0;

  constructor(
    private readonly socket: ClientSocket,
    private readonly open: OpenStream,
    private readonly data: PortForwardSocketData,
  ) {
    this.writer = new Writer(socket);
  }

  message(m: string | Uint8Array): void {
    let frames: SpdyFrame[];
    try {
      frames = this.reader.push(typeof m === "string" ? Buffer.from(m) : m);
    } catch (err) {
      this.socket.close(1002, `not SPDY/3.1: ${(err as Error).message}`.slice(0, 120));
      return;
    }
    for (const f of frames) this.frame(f);
  }

  private frame(f: SpdyFrame): void {
    if (!f.control) {
      const s = this.byStream.get(f.streamId);
      if (s !== undefined && s.type === "data" && f.data.length > 0) s.pair.forward?.input(f.data);
      return;
    }
    if (f.type === SPDY.synStream) this.synStream(f.data);
    else if (f.type === SPDY.rstStream && f.data.length >= 4)
      this.reset(f.data.readUInt32BE(0) & 0x7fffffff);
    else if (f.type === SPDY.ping && f.data.length >= 4)
      void this.writer.write(spdyFrames.ping(f.data.readUInt32BE(0)));
    else if (f.type === SPDY.goAway) this.closed();
  }

  private synStream(payload: Buffer): void {
    const id = payload.length >= 4 ? payload.readUInt32BE(0) & 0x7fffffff : 0;
    let headers: Map<string, string>;
    try {
      if (id === 0) throw new Error("a SYN_STREAM without a stream id");
      headers = this.inflater.decode(payload.subarray(10));
    } catch (err) {
      if (id !== 0) void this.writer.write(spdyFrames.rstStream(id, SPDY.protocolError));
      else this.socket.close(1002, (err as Error).message.slice(0, 120));
      return;
    }
    void this.writer.write(spdyFrames.synReply(this.deflater, id, {}));
    const type = headers.get("streamtype") ?? "";
    const port = Number(headers.get("port"));
    const key = headers.get("requestid") ?? String(id);
    const bad =
      !["data", "error"].includes(type) || !Number.isInteger(port) || port < 1 || port > 65535;
    if (bad || (this.data.ports.length > 0 && !this.data.ports.includes(port))) {
      void this.writer.write(spdyFrames.rstStream(id, SPDY.protocolError));
      return;
    }
    const pair = this.pairs.get(key) ?? { port };
    this.pairs.set(key, pair);
    if (type === "data") pair.data = id;
    else pair.error = id;
    this.byStream.set(id, { pair, type });
    if (type === "data" && pair.forward === undefined) this.start(pair);
  }

  private start(pair: Pair): void {
    this.connections++;
    pair.forward = new Forward(
      this.open,
      forwardReq(this.data, pair.port),
      (bytes) =>
        pair.data === undefined
          ? Promise.resolve()
          : this.writer.write(spdyFrames.data(pair.data, bytes)),
      (error) => {
        if (error !== undefined && pair.error !== undefined)
          void this.writer.write(spdyFrames.data(pair.error, Buffer.from(error), true));
        if (pair.data !== undefined)
          void this.writer.write(spdyFrames.data(pair.data, Buffer.alloc(0), true));
      },
    );
  }

  private reset(id: number): void {
    const s = this.byStream.get(id);
    if (s === undefined) return;
    s.pair.forward?.stop();
  }

  drain(): void {
    this.writer.drain();
  }

  closed(): void {
    for (const p of this.pairs.values()) p.forward?.stop();
    this.writer.drain();
  }
}

/** A channel-protocol client: one connection for the one port in ?ports=. */
class ChannelSession {
  private readonly writer: Writer;
  private readonly forward: Forward;
  connections = 1;

  constructor(socket: ClientSocket, open: OpenStream, data: PortForwardSocketData) {
    this.writer = new Writer(socket);
    const port = data.ports[0] ?? 0;
    const prefix = Uint8Array.of(port & 0xff, port >> 8);
    void this.writer.write(Uint8Array.of(0, ...prefix));
    void this.writer.write(Uint8Array.of(1, ...prefix));
    this.forward = new Forward(
      open,
      forwardReq(data, port),
      (bytes) => {
        const m = new Uint8Array(bytes.length + 1);
        m.set(bytes, 1);
        return this.writer.write(m);
      },
      (error) => {
        if (error !== undefined) void this.writer.write(Uint8Array.of(1, ...Buffer.from(error)));
        socket.close(1000, "");
      },
    );
  }

  message(m: string | Uint8Array): void {
    const bytes = typeof m === "string" ? Buffer.from(m) : m;
    if (bytes.length > 1 && bytes[0] === 0) this.forward.input(bytes.subarray(1));
  }

  drain(): void {
    this.writer.drain();
  }

  closed(): void {
    this.forward.stop();
    this.writer.drain();
  }
}

export function portForwardSockets(d: PodStreamDeps): SocketHandler {
  return {
    open(ws) {
      const w = ws as ServerWebSocket<PortForwardSocketData>;
      const open = d.opener(w.data.node);
      w.data.session =
        w.data.protocol === TUNNEL
          ? new SpdySession(w, open, w.data)
          : new ChannelSession(w, open, w.data);
    },
    message: (ws, m) => (ws as ServerWebSocket<PortForwardSocketData>).data.session?.message(m),
    drain: (ws) => (ws as ServerWebSocket<PortForwardSocketData>).data.session?.drain(),
    close(ws) {
      const w = ws as ServerWebSocket<PortForwardSocketData>;
      const s = w.data.session as (SpdySession | ChannelSession) | undefined;
      s?.closed();
      void d.audit.end(w.data.auditId, "closed", { connections: s?.connections ?? 0 });
    },
  };
}
