// The hub's state: its stores (SQLite in the data folder, or PostgreSQL with --store) and what is
// loaded from them — the fleet view, identities, audit log, releases and node updates — with
// the change feeds that keep watchers current.

import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Pod } from "../api/types.ts";
import { writeFileAtomic } from "../util/atomic-file.ts";
import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import { AuditLog } from "./audit.ts";
import { ownerDaemonSet } from "./deploy/pods.ts";
import type { SecretSealer } from "./deploy/sealing.ts";
import { Fleet } from "./fleet.ts";
import { ReplicaFleet } from "./fleet-replica.ts";
import { loadedKeys } from "./follow-view.ts";
import { Identity } from "./identity.ts";
import { ChangeLog } from "./kube/index.ts";
import type { KubeObject } from "./kube/resources.ts";
import { alwaysLeader, type Leadership } from "./leader.ts";
import { ReleaseStore, type Releases } from "./releases/store.ts";
import { type HubStores, openSqliteStores } from "./stores-sqlite.ts";
import { openNodeUpdates } from "./updates/open.ts";
import { WatchHub } from "./watch.ts";

export const DEFAULT_HEARTBEAT_MS = 10_000;
const DEFAULT_MAX_EVENTS_PER_NODE = 200;

export interface StateOptions {
  /** Directory of the SQLite store (without `postgresUrl`), releases and the operator token. */
  dataDir: string;
  /** The PostgreSQL database of the store (postgres://USER@HOST:PORT/DB); absent: SQLite. */
  postgresUrl?: string;
  clock: Clock;
  log: Logger;
  heartbeatIntervalMs?: number;
  /** Offline after this long without a message (default 3 × heartbeat interval). */
  offlineAfterMs?: number;
  maxEventsPerNode?: number;
  /** How long a node credential is valid (default 90 days; agents renew it after 2/3). */
  credentialLifetimeMs?: number;
  /** The largest release executable a push may upload (default 512 MiB). */
  maxReleaseBytes?: number;
  /** Seals Secrets in the store (deploy/sealing.ts); absent: they are stored plain (tests). */
  sealer?: SecretSealer;
  /** With PostgreSQL: time between a replica's tries for the lead (pg/leader.ts; default 2 s). */
  leaderIntervalMs?: number;
}

/** Writes the operator token to `<dataDir>/operator-token`, readable by the hub's user only. */
export function saveOperatorToken(dataDir: string, token: string): void {
  writeFileAtomic(join(dataDir, "operator-token"), `${token}\n`, { mode: 0o600 });
}

/** The hub's stores: on PostgreSQL with `postgresUrl` (its code loaded only then), agent releases
 * too, with the election of the replica that runs the singletons; else on `<dataDir>/hub.db`,
 * releases in `<dataDir>/releases`, always leading. */
async function openStores(
  opts: StateOptions,
): Promise<HubStores & { leadership: Leadership; releases: Releases }> {
  const releasesDir = join(opts.dataDir, "releases");
  if (opts.postgresUrl === undefined) {
    const stores = openSqliteStores(join(opts.dataDir, "hub.db"), opts.sealer, opts.log);
    const releases = new ReleaseStore(releasesDir, opts.maxReleaseBytes);
    return { ...stores, leadership: alwaysLeader(), releases };
  }
  const { openPostgresStores } = await import("./stores-postgres.ts");
  const { PostgresLeaderElector } = await import("./pg/leader.ts");
  const leadership = new PostgresLeaderElector({
    url: opts.postgresUrl,
    clock: opts.clock,
    log: opts.log.with({ component: "leader" }),
    ...(opts.leaderIntervalMs !== undefined && { tryEveryMs: opts.leaderIntervalMs }),
  });
  const url = opts.postgresUrl;
  const now = () => opts.clock.now();
  const stores = await openPostgresStores(url, opts.sealer, opts.log, { now }, leadership.fence);
  const { PostgresReleaseStore } = await import("./releases/store-postgres.ts");
  const incoming = join(releasesDir, ".incoming");
  const releases = new PostgresReleaseStore(stores.pool, incoming, opts.maxReleaseBytes);
  return { ...stores, leadership, releases };
}

/** The hub's state: its store and what is loaded from it, and the parts that keep it. */
/** `onPodOfDaemonSet`: a pod a DaemonSet owns changed; `onQueued`: the fleet queued a node's
 * progress for the store (FleetOptions.onQueued). */
export async function openState(
  opts: StateOptions,
  onPodOfDaemonSet: () => void,
  onQueued: () => void,
) {
  if (!existsSync(opts.dataDir)) mkdirSync(opts.dataDir, { recursive: true, mode: 0o700 });
  const stores = await openStores(opts);
  const store = stores.hub;
  const loaded = await store.load();
  const watch = new WatchHub();
  // Replicas number changes by the shared log (follow.ts); a single hub from its start time.
  const replicated = stores.follow !== undefined;
  const changes = new ChangeLog(replicated ? (loaded.changesRv ?? 0) : opts.clock.now());
  const heartbeat = opts.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT_MS;
  const offlineAfterMs = opts.offlineAfterMs ?? 3 * heartbeat;
  const fleet = new (replicated ? ReplicaFleet : Fleet)(
    {
      store,
      maxEventsPerNode: opts.maxEventsPerNode ?? DEFAULT_MAX_EVENTS_PER_NODE,
      offlineAfterMs,
      onChange: (c) => {
        watch.publish(c);
        if (!replicated) changes.record(c.kind, c.type, c.object as KubeObject);
        if (c.kind === "pods" && ownerDaemonSet(c.object as Pod) !== undefined) onPodOfDaemonSet();
      },
      onEventDropped: (event) => changes.forget("events", event as KubeObject),
      onQueued,
      now: () => opts.clock.now(),
      storedOnline: replicated,
    },
    loaded,
  );
  const identity = new Identity(
    {
      store,
      nodes: fleet.nodes,
      now: () => opts.clock.now(),
      ...(opts.credentialLifetimeMs !== undefined && {
        credentialLifetimeMs: opts.credentialLifetimeMs,
      }),
    },
    loaded,
  );
  await identity.adoptLegacy(opts.clock.now());
  const createdOperatorToken = await identity.ensureOperatorToken();
  if (createdOperatorToken !== undefined) saveOperatorToken(opts.dataDir, createdOperatorToken);
  const audit = new AuditLog(stores.audit, () => opts.clock.now());
  const releases = stores.releases;
  const updates = await openNodeUpdates(stores.updates, releases, fleet, opts.clock, opts.log);
  return {
    ...{ store, deployStore: stores.deploy, rolloutStore: stores.rollouts, watch, changes },
    nodeSessions: stores.sessions,
    beats: stores.beats,
    offlineAfterMs,
    leadership: stores.leadership,
    ...{ fleet, identity, createdOperatorToken, audit, releases, updates },
    ...(stores.follow !== undefined && {
      follow: { ...stores.follow, rv: loaded.changesRv ?? 0, known: loadedKeys(loaded) },
    }),
  };
}

export type HubState = Awaited<ReturnType<typeof openState>>;
