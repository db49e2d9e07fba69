// The hub's HTTP server: one Bun.serve for agents' connections, operators' watch streams, the
// dashboard and the API. WebSocket upgrades are decided per path by the part that owns them
// (each returns the socket's data, or a Response refusing it); every upgraded socket's events go
// to the handler of its kind, so a new kind of socket is one more entry in `sockets`.
import type { Server, ServerWebSocket } from "bun";
import { StatusError } from "../api/status.ts";

/** The data of an upgraded socket: its kind picks its handler. */
export interface SocketData {
  kind: string;
}

/** What one kind of socket does with its events. */
export interface SocketHandler<D extends SocketData = SocketData> {
  open(ws: ServerWebSocket<D>): void;
  message(ws: ServerWebSocket<D>, data: string | Buffer): void;
  close(ws: ServerWebSocket<D>, code: number, reason: string): void;
  /** The socket's send buffer drained (backpressure is over). */
  drain?(ws: ServerWebSocket<D>): void;
}

/** Decides an upgrade: the socket's data (and headers to answer with), or a refusal. */
export type Upgrade = (
  req: Request,
  url: URL,
  server: Server<SocketData>,
) =>
  | { data: SocketData; headers?: Record<string, string> }
  | Response
  | Promise<{ data: SocketData; headers?: Record<string, string> } | Response>;

export interface HubServerOptions {
  hostname: string;
  port: number;
  tls?: { cert: string; key: string };
  maxPayloadLength: number;
  /** The largest request body Bun takes (a release push); larger ones Bun refuses with 413 (default: Bun's 128 MiB). */
  maxRequestBodySize?: number;
  idleTimeoutSeconds: number;
  /** Upgrades by exact path, tried before `routeUpgrade`. */
  upgrades: Record<string, Upgrade>;
  /** Other requests that may want an upgrade (exec, port-forward); undefined: not theirs. */
  routeUpgrade?(url: URL): Upgrade | undefined;
  sockets: Record<string, SocketHandler>;
  /** Every request that is not an upgrade. */
  fetch(req: Request, server: Server<SocketData>): Response | Promise<Response>;
}

/**
 * `res` with `Connection: close`: the connection ends once it is sent. A refused upgrade (a broken
 * handshake, or a client not allowed in) must not stay as an idle keep-alive connection, which
 * this server (no idle timeout on HTTP) would otherwise hold for as long as the client likes.
 */
function closing(res: Response): Response {
  const headers = new Headers(res.headers);
  headers.set("connection", "close");
  return new Response(res.body, { status: res.status, statusText: res.statusText, headers });
}

async function upgrade(
  decide: Upgrade,
  req: Request,
  url: URL,
  server: Server<SocketData>,
): Promise<Response | undefined> {
  const decided = await decide(req, url, server);
  if (decided instanceof Response) return closing(decided);
  const headers = decided.headers;
  if (server.upgrade(req, { data: decided.data, ...(headers !== undefined && { headers }) }))
    return undefined;
  return closing(
    new StatusError("BadRequest", `${url.pathname} needs a WebSocket upgrade`).toResponse(),
  );
}

function handlerOf(sockets: Record<string, SocketHandler>, data: SocketData): SocketHandler {
  const h = sockets[data.kind];
  if (h === undefined) throw new Error(`no handler for sockets of kind ${data.kind}`);
  return h;
}

/**
 * Bytes that may wait to be sent on one WebSocket. Past it Bun would drop every later message
 * without a word and keep the connection; the hub closes it instead (an agent reconnects and
 * resumes from its acks). Above the watch streams' own limit (16 MiB, watch.ts), which closes
 * them first with 1008. (Bun's automatic pongs stop at 16 MiB waiting, whatever this limit:
 * a peer that pings and never reads gets no more pongs, and no close.)
 */
const SEND_BUFFER_LIMIT = 20 * 1024 * 1024;

/** Starts serving; returns the server (its port, stop()). */
export function serveHub(opts: HubServerOptions): Server<SocketData> {
  const { sockets } = opts;
  return Bun.serve<SocketData>({
    hostname: opts.hostname,
    port: opts.port,
    // No idle timeout on HTTP: followed logs and watches may say nothing for a long while.
    idleTimeout: 0,
    ...(opts.maxRequestBodySize !== undefined && { maxRequestBodySize: opts.maxRequestBodySize }),
    ...(opts.tls !== undefined && { tls: { cert: opts.tls.cert, key: opts.tls.key } }),
    fetch(req, srv) {
      const url = new URL(req.url);
      const decide = opts.upgrades[url.pathname] ?? opts.routeUpgrade?.(url);
      if (decide !== undefined) return upgrade(decide, req, url, srv);
      return opts.fetch(req, srv);
    },
    // What a route let escape is still answered as a Status (a bug, named by its message).
    error: (err) =>
      new StatusError("InternalError", `the hub failed to answer: ${err.message}`).toResponse(),
    websocket: {
      maxPayloadLength: opts.maxPayloadLength,
      idleTimeout: opts.idleTimeoutSeconds,
      perMessageDeflate: false,
      backpressureLimit: SEND_BUFFER_LIMIT,
      closeOnBackpressureLimit: true,
      open: (ws) => handlerOf(sockets, ws.data).open(ws),
      message: (ws, message) => handlerOf(sockets, ws.data).message(ws, message),
      close: (ws, code, reason) => handlerOf(sockets, ws.data).close(ws, code, reason),
      drain: (ws) => handlerOf(sockets, ws.data).drain?.(ws),
    },
  });
}
