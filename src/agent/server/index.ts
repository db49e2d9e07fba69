// The agent's local API: Kubernetes-shaped JSON over HTTP on a unix socket that only root can
// open (the socket is 0600, its directory 0700 when we create it). Serves pods, logs, exec,
// attach, events, health and metrics. A request never crashes the server: failures become Status bodies.
import { chmod, lstat, mkdir, rm } from "node:fs/promises";
import { dirname } from "node:path";
import type { Server } from "bun";
import { SelectorError } from "../../api/selectors.ts";
import type { OpenStream } from "../../streams/types.ts";
import type { Clock } from "../../util/clock.ts";
import { type Logger, nullLogger } from "../../util/log.ts";
import { type ExecSocketData, execWebSocket, upgradeRemoteCommand } from "./exec-socket.ts";
import { FrozenJson } from "./frozen-json.ts";
import { PROMETHEUS_CONTENT_TYPE } from "./metrics.ts";
import { nodeRoute } from "./node-route.ts";
import { findPod, listEvents, listPods, podExec, podLog } from "./routes.ts";
import { badRequest, StatusError } from "./status.ts";
import type { ServerDeps } from "./types.ts";

export type { MetricsRegistry } from "./metrics.ts";
export { createMetricsRegistry } from "./metrics.ts";
export type { ServerDeps } from "./types.ts";
export interface ServerOptions {
  socketPath: string;
  log?: Logger;
  /** Drives polling of followed logs. */
  clock?: Clock;
  /** How often a followed log is polled; 250 ms by default. */
  logPollIntervalMs?: number;
  /** How often a pod watch compares the pods without being told of a change; 1 s by default. */
  watchResyncMs?: number;
  /** Opens interactive exec and attach streams on this device (the local `fleetlet exec -it`,
   * `fleetlet attach`); without it, attach is not served. */
  streams?: OpenStream;
}

export interface AgentServer {
  readonly socketPath: string;
  /** Stops serving, ends open log streams and removes the socket file. */
  stop(): Promise<void>;
}

/** The options of a running server and what it keeps while it runs. */
interface Serving extends ServerOptions {
  json: FrozenJson;
}

/** Removes a socket file left by an agent that died; refuses to remove anything else. */
async function removeStaleSocket(path: string): Promise<void> {
  const st = await lstat(path).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return undefined;
    throw err;
  });
  if (st === undefined) return;
  if (!st.isSocket()) {
    throw new Error(`cannot listen on ${path}: the path exists and is not a socket`);
  }
  const alive = await fetch("http://localhost/healthz", {
    unix: path,
    signal: AbortSignal.timeout(1000),
  }).then(
    () => true,
    () => false,
  );
  if (alive) throw new Error(`cannot listen on ${path}: another agent is serving on that socket`);
  await rm(path, { force: true });
}

async function prepareSocketDir(path: string): Promise<void> {
  const dir = dirname(path);
  const exists = await lstat(dir).then(
    () => true,
    () => false,
  );
  if (!exists) await mkdir(dir, { recursive: true, mode: 0o700 });
}

type Route = (req: Request, url: URL, server: Server<undefined>) => Promise<Response> | Response;

function segments(url: URL): string[] {
  try {
    return url.pathname
      .split("/")
      .filter((s) => s !== "")
      .map(decodeURIComponent);
  } catch {
    throw badRequest(`malformed request path ${JSON.stringify(url.pathname)}`);
  }
}

function healthz(deps: ServerDeps): Response {
  const h = deps.healthy();
  if (h.ok) return new Response("ok", { headers: { "content-type": "text/plain" } });
  const lines = h.reasons.map((r) => `[-]${r}\n`).join("");
  return new Response(`${lines}healthz check failed\n`, {
    status: 503,
    headers: { "content-type": "text/plain" },
  });
}

/** A path's handler; the method it needs when the request's is another; undefined when the
 * path is unknown. */
type Routed = Route | "GET" | "POST" | undefined;

const onlyGet = (method: string, h: Route): Routed => (method === "GET" ? h : "GET");

/** Maps method and path to a handler. */
function route(deps: ServerDeps, opts: Serving, method: string, parts: string[]): Routed {
  const get = (h: Route) => onlyGet(method, h);
  const [a, b, c, ns, kind, name, sub, ...extra] = parts;
  if (parts.length === 1 && a === "healthz") return get(() => healthz(deps));
  if (parts.length === 1 && a === "metrics") {
    return get(
      () => new Response(deps.metrics(), { headers: { "content-type": PROMETHEUS_CONTENT_TYPE } }),
    );
  }
  if (a !== "api" || b !== "v1") return undefined;
  if (parts.length === 3 && c === "pods") return podsRoute(deps, opts, method);
  if (parts.length === 3 && c === "events") return get((_r, u) => listEvents(deps, u.searchParams));
  if (c === "nodes" && parts.length <= 4) return get(() => nodeRoute(deps, ns));
  if (c !== "namespaces" || ns === undefined || extra.length > 0) return undefined;
  if (kind === "events" && name === undefined) {
    return get((_r, u) => listEvents(deps, u.searchParams, ns));
  }
  if (kind !== "pods") return undefined;
  if (name === undefined) return podsRoute(deps, opts, method, ns);
  return podRoute(deps, opts, method, ns, name, sub);
}

/** The pod list (or watch) of one namespace, or of all. */
function podsRoute(deps: ServerDeps, opts: Serving, method: string, namespace?: string): Routed {
  return onlyGet(method, (req, u) =>
    listPods(deps, u.searchParams, namespace, {
      signal: req.signal,
      json: opts.json,
      ...(opts.clock !== undefined && { clock: opts.clock }),
      ...(opts.watchResyncMs !== undefined && { resyncMs: opts.watchResyncMs }),
    }),
  );
}

/** One pod, its log, or an exec or attach in it. */
function podRoute(
  deps: ServerDeps,
  opts: Serving,
  method: string,
  ns: string,
  name: string,
  sub: string | undefined,
): Routed {
  if (sub === undefined) return onlyGet(method, () => Response.json(findPod(deps, ns, name)));
  if (sub === "log") {
    return onlyGet(method, (req, u) => {
      const pod = findPod(deps, ns, name);
      return podLog(deps, pod, u.searchParams, {
        signal: req.signal,
        ...(opts.logPollIntervalMs !== undefined && { pollIntervalMs: opts.logPollIntervalMs }),
        ...(opts.clock !== undefined && { clock: opts.clock }),
      });
    });
  }
  if (sub === "attach") return opts.streams === undefined ? undefined : attachRoute(deps, ns, name);
  if (sub !== "exec") return undefined;
  if (opts.streams !== undefined) return execRoute(deps, method, ns, name);
  if (method !== "POST") return "POST";
  return (req: Request) => podExec(deps, findPod(deps, ns, name), req);
}

const isUpgrade = (req: Request) => req.headers.get("upgrade")?.toLowerCase() === "websocket";

/** Upgrades an exec or attach to its WebSocket (a StatusError when refused). */
function upgrade(
  deps: ServerDeps,
  req: Request,
  u: URL,
  server: Server<undefined>,
  target: Parameters<typeof upgradeRemoteCommand>[4],
): Response {
  const s = server as unknown as Server<ExecSocketData>;
  return upgradeRemoteCommand(deps, req, u, s, target) as unknown as Response;
}

/** An attach: always a WebSocket upgrade, as the kubelet serves it only as a stream. */
function attachRoute(deps: ServerDeps, ns: string, name: string): Routed {
  return (req, u, server) => {
    if (!isUpgrade(req))
      throw badRequest("attach needs a WebSocket upgrade with the remote-command protocol");
    return upgrade(deps, req, u, server, { kind: "attach", namespace: ns, name });
  };
}

/** An exec with streams on: a WebSocket upgrade (interactive), or a POST (one command). */
function execRoute(deps: ServerDeps, method: string, ns: string, name: string): Route {
  return (req: Request, u: URL, server: Server<undefined>) =>
    isUpgrade(req)
      ? upgrade(deps, req, u, server, { kind: "exec", namespace: ns, name })
      : method === "POST"
        ? podExec(deps, findPod(deps, ns, name), req)
        : new StatusError(
            "MethodNotAllowed",
            `${method} is not supported on ${u.pathname}; use POST`,
          ).toResponse();
}

async function handle(
  deps: ServerDeps,
  opts: Serving,
  req: Request,
  server: Server<undefined>,
): Promise<Response> {
  const log = opts.log ?? nullLogger;
  const url = new URL(req.url);
  try {
    const h = route(deps, opts, req.method, segments(url));
    if (h === undefined) {
      throw new StatusError("NotFound", "the server could not find the requested resource");
    }
    if (typeof h === "string") {
      throw new StatusError(
        "MethodNotAllowed",
        `${req.method} is not supported on ${url.pathname}; use ${h}`,
      );
    }
    return await h(req, url, server);
  } catch (err) {
    if (err instanceof StatusError) return err.toResponse();
    if (err instanceof SelectorError) return badRequest(err.message).toResponse();
    log.error("local API request failed", { method: req.method, path: url.pathname, error: err });
    const message = `${req.method} ${url.pathname} failed: ${(err as Error)?.message ?? String(err)}`;
    return new StatusError("InternalError", message).toResponse();
  }
}

/** Listens on opts.socketPath (replacing a stale socket) and serves the local API. */
export async function startAgentServer(
  deps: ServerDeps,
  opts: ServerOptions,
): Promise<AgentServer> {
  const path = opts.socketPath;
  await prepareSocketDir(path);
  await removeStaleSocket(path);
  // No idle timeout: watches, followed logs and long execs may say nothing for minutes. Bun
  // (1.4.5) cuts a streamed response after the server's idle timeout (10 s by default) even when
  // server.timeout(req, 0) was called for it. Its typings offer idleTimeout for TCP servers only,
  // but it applies to a unix socket as well (test/unit/server/watch.test.ts checks it). The
  // socket is root-only and local.
  const serving: Serving = { ...opts, json: new FrozenJson() };
  const options = {
    unix: path,
    idleTimeout: 0,
    fetch: (req: Request, srv: Server<undefined>) => handle(deps, serving, req, srv),
    ...(opts.streams !== undefined && { websocket: execWebSocket(opts.streams) }),
  };
  const server = Bun.serve(options as unknown as Parameters<typeof Bun.serve>[0]);
  try {
    await chmod(path, 0o600);
  } catch (err) {
    await server.stop(true);
    throw new Error(`cannot restrict socket ${path} to mode 0600: ${(err as Error).message}`);
  }
  (opts.log ?? nullLogger).info("local API listening", { socket: path });
  return {
    socketPath: path,
    async stop() {
      await server.stop(true);
      await rm(path, { force: true });
    },
  };
}
