// The hub's stores on SQLite, the embedded default: one database, `hub.db` in the data folder,
// opened here and shared by the SQLite implementation of each store (the fleet's tables, the
// deploy store, node updates, agent rollouts and the audit log). The hub's store closes it.

import type { Logger } from "../util/log.ts";
import type { AuditStore } from "./audit.ts";
import { SqliteAuditStore } from "./audit-sqlite.ts";
import type { ReplicaBeats } from "./dead-holders.ts";
import type { SecretSealer } from "./deploy/sealing.ts";
import type { DeployStore } from "./deploy/store.ts";
import { openDeployStore } from "./deploy/store-sqlite.ts";
import type { NodeSessions } from "./node-sessions.ts";
import type { ChangeFeed } from "./pg/changes.ts";
import type { PgPool } from "./pg/transaction.ts";
import type { AgentRolloutStore } from "./rollouts/store.ts";
import { SqliteAgentRolloutStore } from "./rollouts/store-sqlite.ts";
import type { HubStore } from "./store.ts";
import { openHubDatabase, SqliteHubStore } from "./store-sqlite.ts";
import type { UpdateStore } from "./updates/store.ts";
import { SqliteUpdateStore } from "./updates/store-sqlite.ts";

/** Every store of the hub. */
export interface HubStores {
  /** The fleet's own tables; its close() closes every store. */
  hub: HubStore;
  deploy: DeployStore;
  updates: UpdateStore;
  rollouts: AgentRolloutStore;
  audit: AuditStore;
  /** Who holds each node among replicas (PostgreSQL only: a single hub holds every node). */
  sessions?: NodeSessions;
  /** Replicas' beats, to release the nodes of dead ones (PostgreSQL only; dead-holders.ts). */
  beats?: ReplicaBeats;
  /** PostgreSQL: the pool and the feed of the change log replicas follow (pg/changes.ts), and
   * how a deploy object's stored body is read (a Secret's opened). */
  follow?: {
    pool: PgPool;
    feed: ChangeFeed;
    textOf(o: { kind: string; namespace: string; name: string; body: string }): string;
  };
}

/**
 * The hub's stores on the database at `path`, its Secrets sealed with `sealer`'s sealing key
 * first. A Secret that does not open closes the database and throws SealError: the hub does not
 * start.
 */
export function openSqliteStores(
  path: string,
  sealer: SecretSealer | undefined,
  log: Logger,
): HubStores {
  const db = openHubDatabase(path);
  try {
    return {
      hub: new SqliteHubStore(db),
      deploy: openDeployStore(db, sealer, log),
      updates: new SqliteUpdateStore(db),
      rollouts: new SqliteAgentRolloutStore(db),
      audit: new SqliteAuditStore(db),
    };
  } catch (err) {
    db.close();
    throw err;
  }
}
