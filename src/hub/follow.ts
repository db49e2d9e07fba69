// Hub replicas: the follower of the shared change log (follower.ts) wired to the replica's view
// (follow-view.ts) and its deployer; a single hub has none.

import type { Clock } from "../util/clock.ts";
import type { Logger } from "../util/log.ts";
import type { Bus } from "./bus.ts";
import type { Deployer } from "./deploy/deployer.ts";
import { ASSIGN_KIND, PRUNE_KIND, STATUS_KIND, shownOf } from "./deploy/shared.ts";
import type { RevisionRecord } from "./deploy/store.ts";
import { ReplicaFleet } from "./fleet-replica.ts";
import type { UpdateFollowing } from "./follow-updates.ts";
import { type ObjectRow, ViewApplier } from "./follow-view.ts";
import { ChangeFollower } from "./follower.ts";
import { readChanges, trimChanges } from "./pg/changes.ts";
import { splitKey } from "./pg/fleet-changes.ts";
import type { HubState } from "./state.ts";

/** How the change log is followed and trimmed. */
export interface ChangeLogOptions {
  /** A read without a poke after this long (default 2 s). */
  pollMs?: number;
  /** The least time between two reads of one replica, however often it is poked (default
   * 50 ms): reads are capped at 20 a second whatever the commits of every replica. */
  readGapMs?: number;
  /** Rows older than this are trimmed (default 10 minutes). */
  retentionMs?: number;
  /** At most this many rows are kept (default 1,000,000). */
  maxRows?: number;
}

const CHANGE_LOG_DEFAULTS = {
  pollMs: 2000,
  readGapMs: 50,
  retentionMs: 600_000,
  maxRows: 1_000_000,
};

interface FollowDeps {
  state: HubState;
  deployer: Deployer;
  bus: Bus;
  clock: Clock;
  log: Logger;
  options?: ChangeLogOptions;
  /** The rows of node updates and agent rollouts (follow-updates.ts). */
  updates?: UpdateFollowing;
  /** The agents' sessions here: a node revoked at another replica is let go. */
  sessions?: { revoked(node: string): void };
}

/** A deploy object's row handed to the deployer (a Secret's body opened here). */
function takeObject(d: FollowDeps, row: ObjectRow): void {
  const follow = d.state.follow;
  if (follow === undefined) return;
  const at = row.key.indexOf("/");
  const namespace = row.key.slice(0, at);
  const name = row.key.slice(at + 1);
  let object: unknown = null;
  let revision: RevisionRecord | undefined;
  if (row.object !== null) {
    const stored = JSON.parse(row.object) as { body: string; revision?: RevisionRecord };
    object = JSON.parse(follow.textOf({ kind: row.kind, namespace, name, body: stored.body }));
    revision = stored.revision;
  }
  d.deployer
    .takeStored({
      kind: row.kind,
      namespace,
      name,
      object,
      rv: row.rv,
      ...(revision && { revision }),
    })
    .catch((err: unknown) =>
      d.log.warn("an object another replica stored was not taken", {
        kind: row.kind,
        key: row.key,
        error: err instanceof Error ? err.message : String(err),
      }),
    );
}

/** A row of what the leader's deploy pass decided (deploy/shared.ts), handed to the deployer;
 * whether it was one. */
function takeDecided(deployer: Deployer, row: ObjectRow): boolean {
  if (row.kind === STATUS_KIND) {
    if (row.object !== null) deployer.takeShown(shownOf(row.key, row.object));
  } else if (row.kind === ASSIGN_KIND) {
    const [dsUid, node] = splitKey(row.key);
    deployer.takeAssignment(dsUid, node, row.object);
  } else if (row.kind === PRUNE_KIND) {
    const [dsUid, hash] = splitKey(row.key);
    deployer.takePruned(dsUid, hash);
  } else return false;
  return true;
}

/** Starts following the change log, on PostgreSQL; undefined for a single hub. */
export function startFollower(d: FollowDeps): ChangeFollower | undefined {
  const { follow, fleet } = d.state;
  if (follow === undefined || !(fleet instanceof ReplicaFleet)) return undefined;
  const o = { ...CHANGE_LOG_DEFAULTS, ...d.options };
  const log = d.log.with({ component: "changes" });
  const view = new ViewApplier(
    {
      fleet,
      identity: d.state.identity,
      changes: d.state.changes,
      object: (row) => {
        if (takeDecided(d.deployer, row) || d.updates?.take(row) === true) return;
        takeObject(d, row);
      },
      desired: (node) => d.deployer.storedDesired(node),
      revoked: (node) => d.sessions?.revoked(node),
      log,
    },
    follow.known,
  );
  const limit = 5000;
  const follower = new ChangeFollower(
    {
      read: (after) => readChanges(follow.pool, after, follow.feed.origin, limit),
      apply: (rows) => view.apply(rows),
      reload: async () => {
        const loaded = await d.state.store.load();
        view.reload(loaded);
        await d.deployer.reload();
        await d.updates?.reload();
        return loaded.changesRv ?? 0;
      },
      trimmed: (floor) => d.state.changes.trimmed(floor),
      trim: () =>
        trimChanges(follow.pool, { maxAgeMs: o.retentionMs, maxRows: o.maxRows }, d.clock.now()),
      bus: d.bus,
      feed: follow.feed,
      clock: d.clock,
      log,
      pollMs: o.pollMs,
      readGapMs: o.readGapMs,
      trimEveryMs: Math.max(250, Math.min(60_000, o.retentionMs / 4)),
      limit,
    },
    follow.rv,
  );
  follower.start();
  void follower.poke();
  return follower;
}
