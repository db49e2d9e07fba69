// The hub's store in PostgreSQL (docs/hub-replicas.md, "The store"), for hubs that share one
// database: Bun's SQL client, the schema's numbered migrations run on open (pg/migrations.ts).
// What agents report is queued (report-queue.ts) and written by flush() in one transaction of
// multi-row statements; identity writes are written before their promise resolves. The hub
// runs no two writes of one store at once (store.ts), but reports are queued while a write
// is awaited: a failed write puts back only what is not newer than what was queued since.
import type { SQL } from "bun";
import type { Node } from "../api/node.ts";
import type { Event, Pod } from "../api/types.ts";
import type { ReplicaBeats } from "./dead-holders.ts";
import type { NodeClaim, NodeSessions } from "./node-sessions.ts";
import { appendChanges, ChangeFeed, type ChangeRow, loggedRv } from "./pg/changes.ts";
import { ClaimBatcher } from "./pg/claim-batch.ts";
import { ClaimGate } from "./pg/claim-gate.ts";
import { connectPostgres, POOL_SIZE, type PostgresConnectOptions } from "./pg/connect.ts";
import { batchChanges, forgetNode, podTombstones, setCredential } from "./pg/fleet-changes.ts";
import { putJoinToken, type TokenRow, tokenFromRow, useJoinToken } from "./pg/join-tokens.ts";
import { claimNodes, fenceBatch, nodesOf } from "./pg/node-sessions.ts";
import { keepOperatorFields } from "./pg/operator-fields.ts";
import { beat, holderOrigins, type Released, releaseDead } from "./pg/replicas.ts";
import { type Columns, deleteRows, updateJson, upsertRows } from "./pg/rows.ts";
import { type PgPool, transaction } from "./pg/transaction.ts";
import { QueuedReports, type ReportBatch } from "./report-queue.ts";
import type { HubStore, JoinTokenRecord, LoadedState, NodeProgress } from "./store.ts";

const NODES: Columns = { table: "nodes", key: ["name"], types: { name: "text", progress: "json" } };
const PODS: Columns = {
  table: "pods",
  key: ["node", "uid"],
  types: { node: "text", uid: "text", pod: "json" },
};
const EVENTS: Columns = {
  table: "events",
  key: ["node", "name"],
  types: { node: "text", name: "text", event: "json" },
};

/** Writes a batch of reports in the transaction `tx`. */
async function writeBatch(tx: SQL, b: ReportBatch): Promise<void> {
  const progress = [...b.progress.values()].map((p) => [p.name, JSON.stringify(p)]);
  await upsertRows(tx, NODES, progress);
  const nodeObjects = [...b.nodeObjects].map(([name, n]) => [name, JSON.stringify(n)]);
  await updateJson(tx, NODES, "node", nodeObjects);
  if (b.cleared.size > 0)
    await deleteRows(
      tx,
      { ...PODS, key: ["node"] },
      [...b.cleared].map((n) => [n]),
    );
  const pods = [...b.pods.values()];
  await upsertRows(
    tx,
    PODS,
    pods.flatMap((p) => (p.pod === null ? [] : [[p.node, p.uid, JSON.stringify(p.pod)]])),
  );
  await deleteRows(
    tx,
    PODS,
    pods.filter((p) => p.pod === null).map((p) => [p.node, p.uid]),
  );
  const events = [...b.events.values()];
  await upsertRows(
    tx,
    EVENTS,
    events.flatMap((e) => (e.event === null ? [] : [[e.node, e.name, JSON.stringify(e.event)]])),
  );
  await deleteRows(
    tx,
    EVENTS,
    events.filter((e) => e.event === null).map((e) => [e.node, e.name]),
  );
}

export class PostgresHubStore
  extends QueuedReports
  implements HubStore, NodeSessions, ReplicaBeats
{
  private closed = false;
  /** The epoch this replica holds each node with (node_sessions; absent: not held). */
  private readonly held = new Map<string, number>();
  private readonly lostFns: ((name: string) => void)[] = [];
  private readonly gate = new ClaimGate();
  private readonly claims = new ClaimBatcher<NodeClaim>((replica, names) =>
    this.claimBatch(replica, names),
  );

  /** The store on `pool` (connected and migrated: pg/connect.ts); close() closes the pool.
   * Each write appends its changes to the log as `feed`'s origin and tells `feed` once it
   * committed; a copy from SQLite (`copy`, migrate.ts) appends nothing. */
  constructor(
    private readonly pool: PgPool,
    readonly feed = new ChangeFeed(),
    private readonly copy = false,
  ) {
    super();
  }

  /** Connects to the database at `url` and brings its schema up to date. */
  static async open(url: string, o: PostgresConnectOptions = {}): Promise<PostgresHubStore> {
    return new PostgresHubStore({
      sql: await connectPostgres(url, o),
      size: o.max ?? POOL_SIZE,
    });
  }

  private transaction<T>(fn: (tx: SQL) => Promise<T>, mode = ""): Promise<T> {
    return transaction(this.pool, fn, mode);
  }

  async load(): Promise<LoadedState> {
    return this.transaction(async (tx) => {
      const meta = await tx.unsafe("SELECT value FROM meta WHERE key = 'operator'");
      const tokens = (await tx.unsafe("SELECT * FROM join_tokens")) as TokenRow[];
      const nodes = (await tx.unsafe("SELECT progress, node FROM nodes")) as {
        progress: NodeProgress;
        node: Node | null;
      }[];
      const pods = (await tx.unsafe("SELECT node, pod FROM pods")) as { node: string; pod: Pod }[];
      const events = (await tx.unsafe("SELECT node, event FROM events")) as {
        node: string;
        event: Event;
      }[];
      const operator = (meta as { value: string }[])[0];
      const changesRv = await loggedRv(tx);
      return {
        ...(changesRv > 0 && { changesRv }),
        ...(operator !== undefined && { operatorHash: operator.value }),
        joinTokens: tokens.map(tokenFromRow),
        nodes: nodes.map((n) => ({ ...n.progress, ...(n.node !== null && { node: n.node }) })),
        pods: pods.map((p) => ({ node: p.node, pod: p.pod })),
        events: events.map((e) => ({ node: e.node, event: e.event })),
      };
    }, "ISOLATION LEVEL REPEATABLE READ READ ONLY");
  }

  // ---- written at once ----

  async saveOperatorHash(hash: string): Promise<void> {
    await this.transaction((tx) =>
      tx.unsafe(
        "INSERT INTO meta (key, value) VALUES ('operator', $1) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        [hash],
      ),
    );
  }

  async saveJoinToken(t: JoinTokenRecord): Promise<void> {
    await this.transaction((tx) => putJoinToken(tx, t));
  }

  async readJoinToken(hash: string): Promise<JoinTokenRecord | undefined> {
    const rows = (await this.transaction((tx) =>
      tx.unsafe("SELECT * FROM join_tokens WHERE hash = $1", [hash]),
    )) as TokenRow[];
    return rows[0] === undefined ? undefined : tokenFromRow(rows[0]);
  }

  async readJoinTokens(): Promise<JoinTokenRecord[]> {
    const rows = (await this.transaction((tx) =>
      tx.unsafe("SELECT * FROM join_tokens ORDER BY created_at, id"),
    )) as TokenRow[];
    return rows.map(tokenFromRow);
  }

  /** The use is counted by the stored row (useJoinToken), not set from `t.used`, before the
   * node is written. */
  async saveJoinNow(t: JoinTokenRecord, progress: NodeProgress, now: number): Promise<void> {
    await this.writeNodeNow(
      progress,
      (tx) => setCredential(tx, progress),
      (tx) => useJoinToken(tx, t, progress, now),
    );
  }

  async saveNodeNow(progress: NodeProgress): Promise<void> {
    await this.writeNodeNow(progress, async () => undefined);
  }

  /** Queues `progress` and writes it with everything queued and `also`, in one transaction;
   * when that fails, `progress` is taken back out of the queue (unless a newer one was queued
   * meanwhile). */
  private async writeNodeNow(
    progress: NodeProgress,
    also: (tx: SQL) => Promise<ChangeRow[] | undefined>,
    first?: (tx: SQL) => Promise<void>,
  ) {
    const before = this.queue.queuedProgress(progress.name);
    this.queue.progress(progress);
    try {
      await this.writeQueued(also, first);
    } catch (err) {
      if (this.queue.queuedProgress(progress.name) === progress)
        this.queue.restoreProgress(progress.name, before);
      throw err;
    }
  }

  async forgetNodeNow(name: string): Promise<void> {
    this.queue.forget(name);
    await this.writeQueued(async (tx) => {
      const rows = await forgetNode(tx, name);
      await tx.unsafe("DELETE FROM node_sessions WHERE node = $1", [name]);
      return rows;
    });
    this.held.delete(name);
  }

  async flush(): Promise<void> {
    if (this.queue.size() > 0) await this.writeQueued();
  }

  /** Writes what is queued now, then `after`, in one transaction; when it fails, the batch is
   * put back under what was queued meanwhile. */
  private writeQueued(
    after?: (tx: SQL) => Promise<ChangeRow[] | undefined>,
    first?: (tx: SQL) => Promise<void>,
  ): Promise<void> {
    return this.gate.write(() => this.writeQueuedNow(after, first));
  }

  /** `first` runs at the start of the transaction, before the batch is written. */
  private async writeQueuedNow(
    after?: (tx: SQL) => Promise<ChangeRow[] | undefined>,
    first?: (tx: SQL) => Promise<void>,
  ) {
    const batch = this.queue.take();
    // Fencing (node_sessions): the epochs the batch's nodes were held with when it was taken
    // (only theirs: a copy of every held node's each flush grows with the nodes held).
    const epochs = new Map<string, number>();
    for (const name of nodesOf(batch)) {
      const epoch = this.held.get(name);
      if (epoch !== undefined) epochs.set(name, epoch);
    }
    let fenced: string[] = [];
    let rv: number | undefined;
    try {
      rv = await this.transaction(async (tx) => {
        await first?.(tx);
        fenced = await fenceBatch(tx, batch, epochs);
        await keepOperatorFields(tx, batch, new Set(fenced));
        if (this.copy) {
          await writeBatch(tx, batch);
          await after?.(tx);
          return undefined;
        }
        const tombstones = await podTombstones(tx, batch);
        await writeBatch(tx, batch);
        const rows = await batchChanges(tx, batch, tombstones);
        rows.push(...((await after?.(tx)) ?? []));
        return appendChanges(tx, rows, this.feed.origin, this.feed.now());
      });
    } catch (err) {
      this.queue.putBack(batch);
      throw err;
    }
    this.feed.committed(rv);
    this.lost(fenced, epochs);
  }

  // ---- who holds a node (node-sessions.ts) ----

  /** Claims are batched (pg/claim-batch.ts): those asked together share one transaction. */
  claim(name: string, replica: string): Promise<NodeClaim> {
    return this.claims.ask(name, replica);
  }

  /** Takes the distinct `names` in one transaction, as one claim of the gate. */
  private async claimBatch(replica: string, names: string[]): Promise<Map<string, NodeClaim>> {
    const claims = await this.gate.claim(() => {
      const held = new Map(names.map((n) => [n, this.held.get(n)]));
      const holder = { replica, origin: this.feed.origin };
      return this.transaction((tx) => claimNodes(tx, held, holder, this.feed.now()));
    });
    for (const [name, c] of claims) {
      // What was queued of the node under an older holder's epoch is stale: the store is newer.
      if (c.stored !== undefined) this.queue.forget(name);
      if (c.epoch > (this.held.get(name) ?? 0)) this.held.set(name, c.epoch);
    }
    return claims;
  }

  release(name: string, epoch: number): boolean {
    const held = this.held.get(name);
    if (held === undefined || held >= epoch) return false;
    this.held.delete(name);
    return true;
  }

  onLost(fn: (name: string) => void): void {
    this.lostFns.push(fn);
  }

  /** Lets go of the nodes a flush fenced, unless taken again since. */
  private lost(fenced: string[], epochs: ReadonlyMap<string, number>): void {
    for (const name of fenced) {
      const epoch = epochs.get(name);
      if (epoch === undefined || this.held.get(name) !== epoch) continue;
      this.held.delete(name);
      for (const fn of this.lostFns) fn(name);
    }
  }

  // ---- replicas alive (pg/replicas.ts, dead-holders.ts) ----

  get origin(): string {
    return this.feed.origin;
  }

  beat(replica: string, now: number): Promise<Map<string, number>> {
    return this.transaction((tx) => beat(tx, this.feed.origin, replica, now));
  }

  holderOrigins(): Promise<string[]> {
    return this.transaction((tx) => holderOrigins(tx));
  }

  /** The release's rows are logged under an origin of their own, so this replica's view
   * applies them too (it applies no row of its own origin). */
  async releaseDead(dead: ReadonlyMap<string, number | undefined>, now: number): Promise<Released> {
    const r = await this.transaction(async (tx) => {
      await this.pool.leaderFence?.(tx);
      return releaseDead(tx, dead, `${this.feed.origin}/released`, now);
    });
    this.feed.committed(r.rv);
    return { nodes: r.nodes, offline: r.offline };
  }

  async close(): Promise<{ unstored: number; error?: unknown }> {
    if (this.closed) return { unstored: this.pending() };
    try {
      await this.flush();
      return { unstored: 0 };
    } catch (error) {
      return { unstored: this.pending(), error };
    } finally {
      this.closed = true;
      await this.pool.sql.close();
    }
  }
}
