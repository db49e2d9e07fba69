// The hub's store in SQLite (bun:sqlite), the embedded default: `hub.db` in the data folder, in
// WAL mode, readable by the hub's user only. Every method does its work before its promise is
// returned, so the hub behaves as it did when the store was synchronous.
import { Database } from "bun:sqlite";
import { chmodSync, closeSync, existsSync, openSync } from "node:fs";
import type { Node } from "../api/node.ts";
import type { Event, Pod } from "../api/types.ts";
import { QueuedReports, type ReportBatch } from "./report-queue.ts";
import type { HubStore, JoinTokenRecord, LoadedState, NodeProgress } from "./store.ts";

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS join_tokens (id TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE,
  expires_at INTEGER NOT NULL, labels TEXT NOT NULL, revoked INTEGER NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS nodes (name TEXT PRIMARY KEY, progress TEXT NOT NULL, node TEXT);
CREATE TABLE IF NOT EXISTS pods (node TEXT NOT NULL, uid TEXT NOT NULL, pod TEXT NOT NULL, PRIMARY KEY (node, uid));
CREATE TABLE IF NOT EXISTS events (node TEXT NOT NULL, name TEXT NOT NULL, event TEXT NOT NULL, PRIMARY KEY (node, name));
`;

/**
 * Makes the database file (and its WAL and shared-memory files, which SQLite creates with the
 * database's mode) readable by the hub's user only: it holds the hashes of every credential and
 * token, and the deploy store's Secrets.
 */
function ownerOnly(path: string): void {
  closeSync(openSync(path, "a", 0o600));
  for (const f of [path, `${path}-wal`, `${path}-shm`]) if (existsSync(f)) chmodSync(f, 0o600);
}

/** Opens (creating) the hub's database at `path` (":memory:" for tests), in WAL mode, readable by
 * the hub's user only. */
export function openHubDatabase(path: string): Database {
  if (path !== ":memory:") ownerOnly(path);
  const db = new Database(path, { create: true, strict: true });
  db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;");
  return db;
}

export class SqliteHubStore extends QueuedReports implements HubStore {
  private readonly db: Database;

  /** The store on the hub's database `at` (shared with the other tables' stores, and closed by
   * close()), or on one it opens at that path (openHubDatabase). */
  constructor(at: Database | string) {
    super();
    this.db = typeof at === "string" ? openHubDatabase(at) : at;
    this.db.exec(SCHEMA);
    this.addTokenUseColumns();
  }

  /** Adds the join token use counts to a database made before them (additive). */
  private addTokenUseColumns(): void {
    const cols = this.db.query("PRAGMA table_info(join_tokens)").all() as { name: string }[];
    const have = new Set(cols.map((c) => c.name));
    if (!have.has("max_uses")) this.db.exec("ALTER TABLE join_tokens ADD COLUMN max_uses INTEGER");
    if (!have.has("used"))
      this.db.exec("ALTER TABLE join_tokens ADD COLUMN used INTEGER NOT NULL DEFAULT 0");
  }

  async load(): Promise<LoadedState> {
    const meta = this.db.query("SELECT value FROM meta WHERE key = 'operator'").get() as {
      value: string;
    } | null;
    const tokens = this.db.query("SELECT * FROM join_tokens").all() as {
      id: string;
      hash: string;
      expires_at: number;
      labels: string;
      revoked: number;
      created_at: number;
      max_uses: number | null;
      used: number;
    }[];
    const nodes = this.db.query("SELECT progress, node FROM nodes").all() as {
      progress: string;
      node: string | null;
    }[];
    const pods = this.db.query("SELECT node, pod FROM pods").all() as {
      node: string;
      pod: string;
    }[];
    const events = this.db.query("SELECT node, event FROM events").all() as {
      node: string;
      event: string;
    }[];
    return {
      ...(meta !== null && { operatorHash: meta.value }),
      joinTokens: tokens.map((t) => ({
        id: t.id,
        hash: t.hash,
        expiresAt: t.expires_at,
        labels: JSON.parse(t.labels),
        revoked: t.revoked !== 0,
        createdAt: t.created_at,
        ...(t.max_uses !== null && { maxUses: t.max_uses }),
        used: t.used,
      })),
      nodes: nodes.map((n) => ({
        ...(JSON.parse(n.progress) as NodeProgress),
        ...(n.node !== null && { node: JSON.parse(n.node) as Node }),
      })),
      pods: pods.map((p) => ({ node: p.node, pod: JSON.parse(p.pod) as Pod })),
      events: events.map((e) => ({ node: e.node, event: JSON.parse(e.event) as Event })),
    };
  }

  // ---- written at once ----

  async saveOperatorHash(hash: string): Promise<void> {
    this.db.query("INSERT OR REPLACE INTO meta (key, value) VALUES ('operator', ?)").run(hash);
  }

  async saveJoinToken(t: JoinTokenRecord): Promise<void> {
    this.putJoinToken(t);
  }

  private putJoinToken(t: JoinTokenRecord): void {
    this.db
      .query(
        "INSERT OR REPLACE INTO join_tokens (id, hash, expires_at, labels, revoked, created_at, max_uses, used) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
      )
      .run(
        t.id,
        t.hash,
        t.expiresAt,
        JSON.stringify(t.labels),
        t.revoked ? 1 : 0,
        t.createdAt,
        t.maxUses ?? null,
        t.used,
      );
  }

  async saveJoinNow(t: JoinTokenRecord, progress: NodeProgress): Promise<void> {
    this.writeNodeNow(progress, () => this.putJoinToken(t));
  }

  async saveNodeNow(progress: NodeProgress): Promise<void> {
    this.writeNodeNow(progress, () => {});
  }

  /** Queues `progress` and writes it with everything queued and `also`, in one transaction;
   * when that fails, `progress` is taken back out of the queue. */
  private writeNodeNow(progress: NodeProgress, also: () => void): void {
    const before = this.queue.queuedProgress(progress.name);
    this.queue.progress(progress);
    try {
      this.db.transaction(() => {
        also();
        this.flushNow();
      })();
    } catch (err) {
      this.queue.restoreProgress(progress.name, before);
      throw err;
    }
  }

  async forgetNodeNow(name: string): Promise<void> {
    this.queue.forget(name);
    this.flushNow();
    this.db.transaction(() => {
      this.db.query("DELETE FROM pods WHERE node = ?").run(name);
      this.db.query("DELETE FROM events WHERE node = ?").run(name);
      this.db.query("DELETE FROM nodes WHERE name = ?").run(name);
    })();
  }

  async flush(): Promise<void> {
    this.flushNow();
  }

  /** flush(), at once (inside a transaction, it joins it). */
  private flushNow(): void {
    if (this.queue.size() === 0) return;
    const batch = this.queue.take();
    try {
      this.write(batch);
    } catch (err) {
      this.queue.putBack(batch);
      throw err;
    }
  }

  private write({ progress, nodeObjects, cleared, pods, events }: ReportBatch): void {
    const upsertProgress = this.db.query(
      "INSERT INTO nodes (name, progress) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET progress = excluded.progress",
    );
    const setNode = this.db.query("UPDATE nodes SET node = ? WHERE name = ?");
    const clearPods = this.db.query("DELETE FROM pods WHERE node = ?");
    const putPod = this.db.query("INSERT OR REPLACE INTO pods VALUES (?, ?, ?)");
    const delPod = this.db.query("DELETE FROM pods WHERE node = ? AND uid = ?");
    const putEvent = this.db.query("INSERT OR REPLACE INTO events VALUES (?, ?, ?)");
    const delEvent = this.db.query("DELETE FROM events WHERE node = ? AND name = ?");
    this.db.transaction(() => {
      for (const p of progress.values()) upsertProgress.run(p.name, JSON.stringify(p));
      for (const [name, n] of nodeObjects) setNode.run(JSON.stringify(n), name);
      for (const node of cleared) clearPods.run(node);
      for (const p of pods.values()) {
        if (p.pod === null) delPod.run(p.node, p.uid);
        else putPod.run(p.node, p.uid, JSON.stringify(p.pod));
      }
      for (const e of events.values()) {
        if (e.event === null) delEvent.run(e.node, e.name);
        else putEvent.run(e.node, e.name, JSON.stringify(e.event));
      }
    })();
  }

  async close(): Promise<{ unstored: number; error?: unknown }> {
    try {
      this.flushNow();
      return { unstored: 0 };
    } catch (error) {
      return { unstored: this.pending(), error };
    } finally {
      this.db.close();
    }
  }
}
