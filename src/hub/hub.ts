// `fleetlet hub`: wires its named parts — the state (state.ts: store, fleet view, identities,
// audit log), the agents' sessions with their stream broker, the acknowledging flusher, the deployer, the
// offline detection loop, and one Bun.serve for agents, watches, the dashboard, the operator API,
// the Kubernetes API and pods' logs, exec and port-forward; and, for a replica, what
// replica-wiring.ts starts.

import type { Server } from "bun";
import { AGENT_CONNECT_PATH, DEFAULT_MAX_MESSAGE_BYTES, WATCH_PATH } from "../protocol/index.ts";
import type { Logger } from "../util/log.ts";
import { type ApiDeps, handleApi, operatorOnly, patchNodeLabels, revokeNode } from "./api.ts";
import { createLocalBus } from "./bus.ts";
import { isDashboardPath, serveDashboard } from "./dashboard/index.ts";
import { DeferredDeployWrites } from "./deploy/deferred-store.ts";
import { Deployer } from "./deploy/deployer.ts";
import type { Change, Fleet } from "./fleet.ts";
import { Flusher, type FlushHealth } from "./flusher.ts";
import { followUpdates } from "./follow-updates.ts";
import { healthz, isHealthPath } from "./healthz.ts";
import { createKubeApi } from "./kube/index.ts";
import type { RateLimit } from "./ratelimit.ts";
import type { ReplicaStreams } from "./relay/replica.ts";
import {
  beatReplica,
  followChanges,
  holdingOf,
  nodeTaking,
  type ReplicaOptions,
} from "./replica-wiring.ts";
import { type AgentRollouts, startAgentRollouts } from "./rollouts/index.ts";
import { type SocketData, serveHub } from "./server.ts";
import { AgentSessions, agentSockets, type SessionOptions } from "./sessions.ts";
import { runSingletons } from "./singletons.ts";
import { DEFAULT_HEARTBEAT_MS, type HubState, openState, type StateOptions } from "./state.ts";
import { StreamBroker } from "./streams/broker.ts";
import {
  execSockets,
  guarded,
  type PodStreamDeps,
  podLog,
  podSubresource,
  portForwardSockets,
  streamUpgrade,
} from "./streams/pod-routes.ts";
import type { HubTls } from "./tls/index.ts";
import { listenRenewing, type RenewedTls } from "./tls/renew.ts";
import { bearerToken } from "./tokens.ts";
import { watchSockets, watchUpgrade } from "./watch.ts";

export interface HubOptions extends StateOptions, ReplicaOptions {
  hostname: string;
  port: number;
  /** Serve HTTPS with this certificate (tls/index.ts); absent: plain HTTP (loopback only). */
  tls?: HubTls;
  maxMessageBytes?: number;
  rateLimit?: RateLimit;
  /** How long received messages wait before they are written (and acknowledged) together. */
  flushIntervalMs?: number;
  helloTimeoutMs?: number;
  /** Period of the pass that advances rollouts on timers (default 1 s). */
  rolloutIntervalMs?: number;
  /** Streams (logs, exec, port-forward) per device at once (default 128). */
  maxStreamsPerNode?: number;
  /** The hub's own certificate as of `now`, made again near its end (ownTls); absent: the
   * certificate is given, or there is none. */
  renewTls?: (now: number) => RenewedTls | Promise<RenewedTls>;
  /** Time between checks of the serving certificate (default 24 h). */
  tlsCheckIntervalMs?: number;
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
  flush(): Promise<void>;
  /** Marks silent nodes offline (the liveness loop's iteration). */
  checkLiveness(): string[];
  connectedAgents(): number;
  stop(): Promise<void>;
}

const HUB_DEFAULTS = {
  heartbeatIntervalMs: DEFAULT_HEARTBEAT_MS,
  rateLimit: { messagesPerSecond: 50, burst: 500 },
  flushIntervalMs: 20,
  helloTimeoutMs: 10_000,
  rolloutIntervalMs: 1000,
} as const;

/** Whether a peer address is loopback (127.0.0.0/8, ::1, or IPv4-mapped loopback). */
function isLoopback(address: string | undefined): boolean {
  if (address === undefined) return false;
  return address === "::1" || /^(::ffff:)?127\./.test(address);
}

/** The DaemonSet deployer over the state (loaded, and a first pass run), running its rollout
 * loop until `signal`. */
async function startDeployer(
  opts: HubOptions,
  state: HubState,
  sessions: AgentSessions,
  flush: () => Promise<void>,
  signal: AbortSignal,
): Promise<Deployer> {
  const deployStore = new DeferredDeployWrites(
    state.deployStore,
    opts.log.with({ component: "deploy" }),
    () => opts.clock.now(),
  );
  const bus = opts.bus ?? createLocalBus();
  const deployer = new Deployer({
    store: deployStore,
    loaded: await deployStore.load(),
    fleet: state.fleet,
    bus,
    clock: opts.clock,
    log: opts.log.with({ component: "deploy" }),
    flushStore: flush,
    intervalMs: opts.rolloutIntervalMs ?? HUB_DEFAULTS.rolloutIntervalMs,
    leadTerm: () => state.leadership.term(),
    send: (node) => sessions.desiredChanged(node),
  });
  bus.subscribe("desired", (m) => deployer.desiredChanged(m.node));
  await deployer.reconcile();
  void deployer.run(signal);
  return deployer;
}

/** Replicas: the follower of the shared change log (follow.ts); none for a single hub. */
/** The offline detection loop, which also closes connections whose credential expired; returns
 * its iteration and its stop. */
function startLiveness(
  opts: HubOptions,
  fleet: Fleet,
  sessions: AgentSessions,
): { check(): string[]; stop(): void } {
  const heartbeat = opts.heartbeatIntervalMs ?? HUB_DEFAULTS.heartbeatIntervalMs;
  const check = () => {
    sessions.closeExpired(opts.clock.now());
    return fleet.checkLiveness(opts.clock.now());
  };
  let cancel: (() => void) | undefined;
  const loop = () => {
    check();
    cancel = opts.clock.setTimer(Math.max(100, heartbeat / 2), loop);
  };
  loop();
  return { check, stop: () => cancel?.() };
}

/** Every node, pod and event as ADDED: what a new watch of the dashboard gets first. */
function initialChanges(fleet: Fleet): Change[] {
  return [
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
}

/** The HTTP API's dependencies: the operator routes and the Kubernetes API. */
function apiDepsOf(
  opts: HubOptions,
  state: HubState,
  deployer: Deployer,
  sessions: AgentSessions,
  rollouts: AgentRollouts,
): ApiDeps {
  const deps: ApiDeps = {
    fleet: state.fleet,
    ...(opts.tls?.caPem !== undefined && { ca: { pem: opts.tls.caPem, hash: opts.tls.caHash } }),
    identity: state.identity,
    deployer,
    audit: state.audit,
    clock: opts.clock,
    revoked: (n: string) => sessions.revoked(n),
    maxBodyBytes: 64 * 1024,
    releases: { releases: state.releases, log: opts.log.with({ component: "releases" }) },
    updates: { updates: state.updates, changed: (n) => sessions.updateChanged(n) },
    agentRollouts: rollouts,
    ...(opts.relay !== undefined && { holder: opts.relay }),
    kube: createKubeApi({
      fleet: state.fleet,
      deployer,
      changes: state.changes,
      clock: opts.clock,
      node: {
        patch: (req, name) => patchNodeLabels(deps, req, name),
        delete: (name) => revokeNode(deps, name),
      },
    }),
  };
  return deps;
}

/** The pod log, exec and port-forward routes over the broker, or the relay for a node whose agent
 * is not connected here. */
function podStreamsOf(
  state: HubState,
  broker: StreamBroker,
  sessions: AgentSessions,
  relay: ReplicaStreams | undefined,
): PodStreamDeps {
  return {
    findPod: (namespace, name) => {
      const found = state.fleet
        .allPods()
        .find(
          (p) =>
            p.pod.metadata.name === name && (p.pod.metadata.namespace ?? "default") === namespace,
        );
      return found === undefined ? undefined : { node: found.node, pod: found.pod };
    },
    opener: (node) =>
      relay === undefined || sessions.connection(node) !== undefined
        ? broker.opener(node)
        : relay.opener(node),
    audit: state.audit,
    authorize: (req, url) => operatorOnly(state, req, url),
  };
}

interface Served {
  opts: HubOptions;
  state: HubState;
  sessions: AgentSessions;
  api: ApiDeps;
  pods: PodStreamDeps;
  /** How the store's writes go (healthz.ts). */
  storeHealth(): FlushHealth;
}

/** Bun.serve with the hub's upgrades, sockets and API, with `tls` (absent: plain HTTP) on
 * `port` (0: any free one). */
function serve(
  { opts, state, sessions, api, pods, storeHealth }: Served,
  tls: HubTls | undefined,
  port: number,
) {
  const heartbeat = opts.heartbeatIntervalMs ?? HUB_DEFAULTS.heartbeatIntervalMs;
  const maxMessageBytes = opts.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  const agentUpgrade = (req: Request, _url: URL, server: Server<SocketData>) => {
    const secure = tls !== undefined || isLoopback(server.requestIP(req)?.address);
    return { data: sessions.newData(bearerToken(req.headers.get("authorization")), secure) };
  };
  return serveHub({
    hostname: opts.hostname,
    port,
    ...(tls !== undefined && { tls: { cert: tls.cert, key: tls.key } }),
    maxPayloadLength: maxMessageBytes * 2,
    // A release push streams its executable; the store refuses one over its limit with a 413.
    maxRequestBodySize: state.releases.maxBytes + 1024 * 1024,
    idleTimeoutSeconds: Math.min(960, Math.ceil((6 * heartbeat) / 1000)),
    upgrades: { [AGENT_CONNECT_PATH]: agentUpgrade, [WATCH_PATH]: watchUpgrade(state.identity) },
    routeUpgrade: (url) => streamUpgrade(pods, url),
    sockets: {
      agent: agentSockets(sessions),
      watch: watchSockets(state.watch, () => initialChanges(state.fleet)),
      exec: execSockets(pods),
      portforward: portForwardSockets(pods),
    },
    fetch(req, server) {
      const url = new URL(req.url);
      if (isDashboardPath(url.pathname)) return serveDashboard(req, url);
      if (isHealthPath(url.pathname)) return healthz(url.pathname, storeHealth());
      const sub = podSubresource(url.pathname);
      if (sub?.sub === "log")
        return guarded(req, () => podLog(pods, req, url, sub.namespace, sub.name));
      return handleApi(api, req, server.requestIP(req)?.address ?? "");
    },
  });
}

/** The agents' sessions: their connections, with the flusher's acks, the deployer's desired
 * states and the stream broker. */
function agentSessions(
  opts: HubOptions,
  state: HubState,
  flusher: Flusher,
  broker: StreamBroker,
  deployer: () => Deployer | undefined,
  take: SessionOptions["take"],
): AgentSessions {
  return new AgentSessions({
    fleet: state.fleet,
    identity: state.identity,
    clock: opts.clock,
    log: opts.log,
    heartbeatIntervalMs: opts.heartbeatIntervalMs ?? HUB_DEFAULTS.heartbeatIntervalMs,
    maxMessageBytes: opts.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES,
    rateLimit: opts.rateLimit ?? HUB_DEFAULTS.rateLimit,
    helloTimeoutMs: opts.helloTimeoutMs ?? HUB_DEFAULTS.helloTimeoutMs,
    markDirty: (name) => flusher.markDirty(name),
    flushNow: () => flusher.flush(),
    desiredFor: (node, agentGeneration, secure) =>
      deployer()?.desiredFor(node, agentGeneration, secure),
    onDesiredAck: () => deployer()?.markDirty(),
    broker,
    ...(opts.relay !== undefined && {
      holding: holdingOf(opts.relay, broker, (n) => state.fleet.health.view(n)),
    }),
    updates: state.updates,
    ...(take !== undefined && { take }),
  });
}

/** The listener serving `s`, renewing the hub's own certificate (tls/renew.ts). */
function listen(s: Served) {
  return listenRenewing((tls, port) => serve(s, tls, port), s.opts);
}

/** The flusher of the state's store, acknowledging with `ack`. */
function flusherOf(opts: HubOptions, state: HubState, ack: (node: string, seq: number) => void) {
  return new Flusher({
    fleet: state.fleet,
    store: state.store,
    clock: opts.clock,
    log: opts.log,
    intervalMs: opts.flushIntervalMs ?? HUB_DEFAULTS.flushIntervalMs,
    ack,
  });
}

export async function startHub(opts: HubOptions): Promise<Hub> {
  let deployer: Deployer | undefined;
  let flusher: Flusher | undefined;
  const state = await openState(
    opts,
    () => deployer?.markDirty(),
    () => flusher?.soon(),
  );
  let sessions: AgentSessions | undefined;
  flusher = flusherOf(opts, state, (name, seq) => sessions?.ack(name, seq));
  const flush = () => flusher.flush();
  const broker = new StreamBroker({
    log: opts.log.with({ component: "streams" }),
    connection: (node) => sessions?.connection(node),
    ...(opts.maxStreamsPerNode !== undefined && { maxStreams: opts.maxStreamsPerNode }),
  });
  const take = nodeTaking(opts, state, () => sessions);
  sessions = agentSessions(opts, state, flusher, broker, () => deployer, take);
  const stopDeploy = new AbortController();
  deployer = await startDeployer(opts, state, sessions, flush, stopDeploy.signal);
  let rollouts: AgentRollouts | undefined;
  const updates = followUpdates(state.updates, () => rollouts, sessions);
  const follower = followChanges(opts, state, deployer, { updates, sessions });
  const liveness = startLiveness(opts, state.fleet, sessions);
  const everyMs = opts.rolloutIntervalMs ?? HUB_DEFAULTS.rolloutIntervalMs;
  rollouts = await startAgentRollouts(state, sessions, opts, everyMs, stopDeploy.signal);
  const singletons = { deployer, rollouts, clock: opts.clock, log: opts.log };
  runSingletons(state.leadership, singletons, stopDeploy.signal);
  const beating = beatReplica(opts, state);
  const api = apiDepsOf(opts, state, deployer, sessions, rollouts);
  const pods = podStreamsOf(state, broker, sessions, opts.relay);
  const storeHealth = () => flusher.health();
  const listener = listen({ opts, state, sessions, api, pods, storeHealth });
  const scheme = opts.tls === undefined ? "http" : "https";
  const agents = sessions;
  return {
    url: `${scheme}://${opts.hostname.includes(":") ? `[${opts.hostname}]` : opts.hostname}:${listener.port}`,
    ...(state.createdOperatorToken !== undefined && {
      createdOperatorToken: state.createdOperatorToken,
    }),
    ...(opts.tls?.caHash !== undefined && { caHash: opts.tls.caHash }),
    fleet: state.fleet,
    deployer,
    flush,
    checkLiveness: liveness.check,
    connectedAgents: () => agents.count(),
    async stop() {
      stopDeploy.abort();
      liveness.stop();
      beating?.stop();
      agents.closeAll();
      state.watch.closeAll();
      flusher.stop();
      await flush();
      follower?.stop();
      await listener.stop();
      opts.relay?.close();
      await opts.bus?.close();
      warnUnstored(opts.log, await state.store.close());
    },
  };
}

/** Says what the store could not write as the hub stopped (agents resend it). */
function warnUnstored(log: Logger, closed: { unstored: number; error?: unknown }): void {
  if (closed.unstored > 0)
    log.warn("hub stopped with writes not stored; agents resend what was not acknowledged", {
      unstored: closed.unstored,
      error: closed.error,
    });
}
