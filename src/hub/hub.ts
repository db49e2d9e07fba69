// `fleetlet hub`: wires the store, the fleet view, identities, agent sessions, watch streams and
// the HTTP API behind one Bun.serve, and runs the two loops (store flush, offline detection).
import { chmodSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Server, ServerWebSocket } from "bun";
import type { Pod } from "../api/types.ts";
import { AGENT_CONNECT_PATH, DEFAULT_MAX_MESSAGE_BYTES, WATCH_PATH } from "../protocol/index.ts";
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import { type ApiDeps, handleApi, patchNodeLabels, revokeNode } from "./api.ts";
import { createLocalBus } from "./bus.ts";
import { isDashboardPath, serveDashboard } from "./dashboard/index.ts";
import { Deployer } from "./deploy/deployer.ts";
import { ownerDaemonSet } from "./deploy/pods.ts";
import { SqliteDeployStore } from "./deploy/store.ts";
import { type Change, Fleet } from "./fleet.ts";
import { Flusher } from "./flusher.ts";
import { Identity } from "./identity.ts";
import { ChangeLog, createKubeApi } from "./kube/index.ts";
import type { KubeObject } from "./kube/resources.ts";
import type { RateLimit } from "./ratelimit.ts";
import { type SocketData, serveHub } from "./server.ts";
import { AgentSessions, type AgentSocketData } from "./sessions.ts";
import { HubStore } from "./store.ts";
import type { HubTls } from "./tls/index.ts";
import { bearerToken } from "./tokens.ts";
import { WatchHub, type WatchSocketData, watchUpgrade } from "./watch.ts";

export interface HubOptions {
  /** Directory of the store and the operator token. */
  dataDir: string;
  hostname: string;
  port: number;
  /** Serve HTTPS with this certificate (tls/index.ts); absent: plain HTTP (loopback only). */
  tls?: HubTls;
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
  /** sha256:<hex> of the hub's CA (put into join tokens), when it has one. */
  caHash?: string;
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
  const tls = opts.tls === undefined ? undefined : { cert: opts.tls.cert, key: opts.tls.key };
  const store = new HubStore(join(opts.dataDir, "hub.db"));
  const loaded = store.load();
  const watch = new WatchHub();
  const changes = new ChangeLog(opts.clock.now());
  let deployer: Deployer | undefined;
  const fleet = new Fleet(
    {
      store,
      maxEventsPerNode: opts.maxEventsPerNode ?? HUB_DEFAULTS.maxEventsPerNode,
      offlineAfterMs: opts.offlineAfterMs ?? 3 * heartbeatIntervalMs,
      onChange: (c) => {
        watch.publish(c);
        changes.record(c.kind, c.type, c.object as KubeObject);
        if (c.kind === "pods" && ownerDaemonSet(c.object as Pod) !== undefined)
          deployer?.markDirty();
      },
    },
    loaded,
  );
  const identity = new Identity({ store, nodes: fleet.nodes }, loaded);
  const createdOperatorToken = identity.ensureOperatorToken();
  if (createdOperatorToken !== undefined) saveOperatorToken(opts.dataDir, createdOperatorToken);

  const flusher = new Flusher({
    fleet,
    store,
    clock: opts.clock,
    log: opts.log,
    intervalMs: flushIntervalMs,
    ack: (name, seq) => sessions.ack(name, seq),
  });
  const flush = () => flusher.flush();
  const sessions = new AgentSessions({
    fleet,
    identity,
    clock: opts.clock,
    log: opts.log,
    heartbeatIntervalMs,
    maxMessageBytes,
    rateLimit: opts.rateLimit ?? HUB_DEFAULTS.rateLimit,
    helloTimeoutMs: opts.helloTimeoutMs ?? HUB_DEFAULTS.helloTimeoutMs,
    markDirty: (name) => flusher.markDirty(name),
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

  const agentUpgrade = (req: Request, _url: URL, server: Server<SocketData>) => {
    const secure = opts.tls !== undefined || isLoopback(server.requestIP(req)?.address);
    return { data: sessions.newData(bearerToken(req.headers.get("authorization")), secure) };
  };
  const apiDeps: ApiDeps = {
    fleet,
    ...(opts.tls?.caPem !== undefined && { ca: { pem: opts.tls.caPem, hash: opts.tls.caHash } }),
    identity,
    deployer: deploy,
    clock: opts.clock,
    revoked: (n: string) => sessions.revoked(n),
    maxBodyBytes: 64 * 1024,
    kube: createKubeApi({
      fleet,
      deployer: deploy,
      changes,
      now: () => opts.clock.now(),
      node: {
        patch: (req, name) => patchNodeLabels(apiDeps, req, name),
        delete: (name) => revokeNode(apiDeps, name),
      },
    }),
  };
  const server = serveHub({
    hostname: opts.hostname,
    port: opts.port,
    ...(tls !== undefined && { tls }),
    maxPayloadLength: maxMessageBytes * 2,
    idleTimeoutSeconds: Math.min(960, Math.ceil((6 * heartbeatIntervalMs) / 1000)),
    upgrades: { [AGENT_CONNECT_PATH]: agentUpgrade, [WATCH_PATH]: watchUpgrade(identity) },
    sockets: {
      agent: {
        open: (ws) => sessions.open(ws as ServerWebSocket<AgentSocketData>),
        message: (ws, m) => sessions.message(ws as ServerWebSocket<AgentSocketData>, m),
        close: (ws) => sessions.close(ws as ServerWebSocket<AgentSocketData>),
      },
      watch: {
        open: (ws) => {
          const w = ws as ServerWebSocket<WatchSocketData>;
          watch.add(w, w.data.initial ? initialChanges() : []);
        },
        message: () => {},
        close: (ws) => watch.remove(ws as ServerWebSocket<WatchSocketData>),
      },
    },
    fetch(req) {
      const url = new URL(req.url);
      if (isDashboardPath(url.pathname)) return serveDashboard(req, url);
      return handleApi(apiDeps, req);
    },
  });

  const scheme = opts.tls === undefined ? "http" : "https";
  return {
    url: `${scheme}://${opts.hostname.includes(":") ? `[${opts.hostname}]` : opts.hostname}:${server.port}`,
    ...(createdOperatorToken !== undefined && { createdOperatorToken }),
    ...(opts.tls?.caHash !== undefined && { caHash: opts.tls.caHash }),
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
      flusher.stop();
      flush();
      await server.stop(true);
      store.close();
    },
  };
}
