// `fleetlet hub`: wires the store, the fleet view, identities, agent sessions, watch streams and
// the HTTP API behind one Bun.serve, and runs the two loops (store flush, offline detection).
import { chmodSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Server, ServerWebSocket } from "bun";
import { StatusError } from "../api/status.ts";
import type { Pod } from "../api/types.ts";
import { AGENT_CONNECT_PATH, DEFAULT_MAX_MESSAGE_BYTES, WATCH_PATH } from "../protocol/index.ts";
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import { handleApi } from "./api.ts";
import { createLocalBus } from "./bus.ts";
import { isDashboardPath, serveDashboard } from "./dashboard/index.ts";
import { Deployer } from "./deploy/deployer.ts";
import { ownerDaemonSet } from "./deploy/pods.ts";
import { SqliteDeployStore } from "./deploy/store.ts";
import { type Change, Fleet } from "./fleet.ts";
import { Identity } from "./identity.ts";
import type { RateLimit } from "./ratelimit.ts";
import { AgentSessions, type AgentSocketData } from "./sessions.ts";
import { HubStore } from "./store.ts";
import { bearerToken } from "./tokens.ts";
import { parseWatchKinds, WatchHub, type WatchSocketData } from "./watch.ts";

export interface HubOptions {
  /** Directory of the store and the operator token. */
  dataDir: string;
  hostname: string;
  port: number;
  tls?: { certFile: string; keyFile: string };
  clock: Clock;
  log: Logger;
  heartbeatIntervalMs?: number;
  /** Offline after this long without a message (default 3 × heartbeat interval). */
  offlineAfterMs?: number;
  maxMessageBytes?: number;
  rateLimit?: RateLimit;
  /** How long received messages wait before they are written (and acknowledged) together. */
  flushIntervalMs?: number;
  maxEventsPerNode?: number;
  helloTimeoutMs?: number;
  /** Period of the pass that advances rollouts on timers (default 1 s). */
  rolloutIntervalMs?: number;
}

export interface Hub {
  /** e.g. "http://127.0.0.1:7443". */
  url: string;
  /** The operator token, only on the start that created it. */
  createdOperatorToken?: string;
  fleet: Fleet;
  deployer: Deployer;
  /** Writes what is queued and sends the acks (the flush loop's iteration). */
  flush(): void;
  /** Marks silent nodes offline (the liveness loop's iteration). */
  checkLiveness(): string[];
  connectedAgents(): number;
  stop(): Promise<void>;
}

type SocketData = AgentSocketData | WatchSocketData;

export const HUB_DEFAULTS = {
  heartbeatIntervalMs: 10_000,
  rateLimit: { messagesPerSecond: 50, burst: 500 },
  flushIntervalMs: 20,
  maxEventsPerNode: 200,
  helloTimeoutMs: 10_000,
  rolloutIntervalMs: 1000,
} as const;

/** Whether a peer address is loopback (127.0.0.0/8, ::1, or IPv4-mapped loopback). */
export function isLoopback(address: string | undefined): boolean {
  if (address === undefined) return false;
  return address === "::1" || /^(::ffff:)?127\./.test(address);
}

function saveOperatorToken(dataDir: string, token: string): void {
  const file = join(dataDir, "operator-token");
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
}

export function startHub(opts: HubOptions): Hub {
  const heartbeatIntervalMs = opts.heartbeatIntervalMs ?? HUB_DEFAULTS.heartbeatIntervalMs;
  const maxMessageBytes = opts.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  const flushIntervalMs = opts.flushIntervalMs ?? HUB_DEFAULTS.flushIntervalMs;
  if (!existsSync(opts.dataDir)) mkdirSync(opts.dataDir, { recursive: true, mode: 0o700 });
  const store = new HubStore(join(opts.dataDir, "hub.db"));
  const loaded = store.load();
  const watch = new WatchHub();
  let deployer: Deployer | undefined;
  const fleet = new Fleet(
    {
      store,
      maxEventsPerNode: opts.maxEventsPerNode ?? HUB_DEFAULTS.maxEventsPerNode,
      offlineAfterMs: opts.offlineAfterMs ?? 3 * heartbeatIntervalMs,
      onChange: (c) => {
        watch.publish(c);
        if (c.kind === "pods" && ownerDaemonSet(c.object as Pod) !== undefined)
          deployer?.markDirty();
      },
    },
    loaded,
  );
  const identity = new Identity({ store, nodes: fleet.nodes }, loaded);
  const createdOperatorToken = identity.ensureOperatorToken();
  if (createdOperatorToken !== undefined) saveOperatorToken(opts.dataDir, createdOperatorToken);

  const dirty = new Set<string>();
  let cancelFlush: (() => void) | undefined;
  const flush = () => {
    cancelFlush?.();
    cancelFlush = undefined;
    const acks: [string, number][] = [];
    for (const name of dirty) acks.push([name, fleet.markReceived(name)]);
    dirty.clear();
    try {
      store.flush();
    } catch (err) {
      opts.log.error("hub store write failed; agents will resend", { error: err });
      return;
    }
    for (const [name, seq] of acks) {
      fleet.stored(name, seq);
      sessions.ack(name, seq);
    }
  };
  const sessions = new AgentSessions({
    fleet,
    identity,
    clock: opts.clock,
    log: opts.log,
    heartbeatIntervalMs,
    maxMessageBytes,
    rateLimit: opts.rateLimit ?? HUB_DEFAULTS.rateLimit,
    helloTimeoutMs: opts.helloTimeoutMs ?? HUB_DEFAULTS.helloTimeoutMs,
    markDirty(name) {
      dirty.add(name);
      cancelFlush ??= opts.clock.setTimer(flushIntervalMs, flush);
    },
    flushNow: flush,
    desiredFor: (node, agentGeneration, secure) =>
      deployer?.desiredFor(node, agentGeneration, secure),
    onDesiredAck: () => deployer?.markDirty(),
  });
  const deployStore = new SqliteDeployStore(store.database);
  const bus = createLocalBus();
  deployer = new Deployer({
    store: deployStore,
    loaded: deployStore.load(),
    fleet,
    bus,
    clock: opts.clock,
    log: opts.log.with({ component: "deploy" }),
    flushStore: flush,
    intervalMs: opts.rolloutIntervalMs ?? HUB_DEFAULTS.rolloutIntervalMs,
  });
  const deploy = deployer;
  bus.subscribe((m) => sessions.desiredChanged(m.node));
  deploy.reconcile();
  const stopDeploy = new AbortController();
  void deploy.run(stopDeploy.signal);
  const checkLiveness = () => fleet.checkLiveness(opts.clock.now());
  let cancelLiveness: (() => void) | undefined;
  const livenessLoop = () => {
    checkLiveness();
    cancelLiveness = opts.clock.setTimer(Math.max(100, heartbeatIntervalMs / 2), livenessLoop);
  };
  livenessLoop();

  const initialChanges = (): Change[] => [
    ...[...fleet.nodes.keys()].flatMap((n) => {
      const object = fleet.view(n);
      return object === undefined
        ? []
        : [{ type: "ADDED" as const, kind: "nodes" as const, object }];
    }),
    ...fleet
      .allPods()
      .map((p) => ({ type: "ADDED" as const, kind: "pods" as const, object: p.pod })),
    ...fleet
      .allEvents()
      .map((e) => ({ type: "ADDED" as const, kind: "events" as const, object: e.event })),
  ];

  const upgrade = (req: Request, server: Server<SocketData>, url: URL): Response | undefined => {
    if (url.pathname === AGENT_CONNECT_PATH) {
      const secure = opts.tls !== undefined || isLoopback(server.requestIP(req)?.address);
      const data = sessions.newData(bearerToken(req.headers.get("authorization")), secure);
      if (server.upgrade(req, { data })) return undefined;
      return new StatusError(
        "BadRequest",
        `${AGENT_CONNECT_PATH} needs a WebSocket upgrade`,
      ).toResponse();
    }
    const token =
      bearerToken(req.headers.get("authorization")) ?? url.searchParams.get("token") ?? undefined;
    if (!identity.isOperator(token))
      return new StatusError(
        "Unauthorized",
        "a valid operator token is required (Authorization: Bearer or ?token=)",
      ).toResponse();
    const kinds = parseWatchKinds(url.searchParams.get("kinds"));
    if (typeof kinds === "string") return new StatusError("BadRequest", kinds).toResponse();
    const data: WatchSocketData = {
      kind: "watch",
      kinds,
      initial: url.searchParams.get("initial") !== "false",
    };
    if (server.upgrade(req, { data })) return undefined;
    return new StatusError("BadRequest", `${WATCH_PATH} needs a WebSocket upgrade`).toResponse();
  };

  const server = Bun.serve<SocketData>({
    hostname: opts.hostname,
    port: opts.port,
    ...(opts.tls !== undefined && {
      tls: { cert: Bun.file(opts.tls.certFile), key: Bun.file(opts.tls.keyFile) },
    }),
    fetch(req, srv) {
      const url = new URL(req.url);
      if (url.pathname === AGENT_CONNECT_PATH || url.pathname === WATCH_PATH)
        return upgrade(req, srv, url);
      if (isDashboardPath(url.pathname)) return serveDashboard(req, url);
      return handleApi(
        {
          fleet,
          identity,
          deployer: deploy,
          clock: opts.clock,
          revoked: (n) => sessions.revoked(n),
          maxBodyBytes: 64 * 1024,
        },
        req,
      );
    },
    websocket: {
      maxPayloadLength: maxMessageBytes * 2,
      idleTimeout: Math.min(960, Math.ceil((6 * heartbeatIntervalMs) / 1000)),
      perMessageDeflate: false,
      open(ws: ServerWebSocket<SocketData>) {
        if (ws.data.kind === "agent") sessions.open(ws as ServerWebSocket<AgentSocketData>);
        else
          watch.add(
            ws as ServerWebSocket<WatchSocketData>,
            ws.data.initial ? initialChanges() : [],
          );
      },
      message(ws: ServerWebSocket<SocketData>, message) {
        if (ws.data.kind === "agent")
          sessions.message(ws as ServerWebSocket<AgentSocketData>, message);
      },
      close(ws: ServerWebSocket<SocketData>) {
        if (ws.data.kind === "agent") sessions.close(ws as ServerWebSocket<AgentSocketData>);
        else watch.remove(ws as ServerWebSocket<WatchSocketData>);
      },
    },
  });

  const scheme = opts.tls === undefined ? "http" : "https";
  return {
    url: `${scheme}://${opts.hostname.includes(":") ? `[${opts.hostname}]` : opts.hostname}:${server.port}`,
    ...(createdOperatorToken !== undefined && { createdOperatorToken }),
    fleet,
    deployer: deploy,
    flush,
    checkLiveness,
    connectedAgents: () => sessions.count(),
    async stop() {
      stopDeploy.abort();
      cancelLiveness?.();
      sessions.closeAll();
      watch.closeAll();
      flush();
      await server.stop(true);
      store.close();
    },
  };
}
