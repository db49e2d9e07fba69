// The hub's durable store (bun:sqlite). Identity changes (tokens, joins, revokes) are written at
// once; what agents report is queued and written in one transaction per flush, coalesced by key,
// so that ingest costs a map update per message. Everything is loaded into memory at start.
// A write that fails (SQLITE_FULL: the data disk is full) throws and loses nothing queued: the
// queue is put back, newer entries winning, and written by the next flush that works.
import { Database } from "bun:sqlite";
import { chmodSync, closeSync, existsSync, openSync } from "node:fs";
import type { Node } from "../api/node.ts";
import { StatusError } from "../api/status.ts";
import type { Event, Pod } from "../api/types.ts";

export interface JoinTokenRecord {
  id: string;
  hash: string;
  expiresAt: number;
  labels: Record<string, string>;
  revoked: boolean;
  createdAt: number;
  /** How many joins the token allows; absent: any number until it expires. */
  maxUses?: number;
  /** How many joins it was used for (counted with the join, in one transaction). */
  used: number;
}

/** A node credential's hash and its times (ms). */
export interface CredentialRecord {
  hash: string;
  issuedAt: number;
  expiresAt: number;
}

/** What the hub knows of a node that joined. */
export interface NodeRecord {
  name: string;
  credentialHash: string;
  /** Labels given at join (join token's and the join request's). */
  hubLabels: Record<string, string>;
  /** When `credentialHash` was issued and expires (ms); absent on records stored before
   * credentials had a lifetime (the hub gives them one on start: Identity.adoptLegacy). */
  credentialIssuedAt?: number;
  credentialExpiresAt?: number;
  /** A rotated credential handed to the agent and not yet used: the old one keeps working until
   * the agent uses this one (connects with it or says it saved it) or the old one expires. */
  pendingCredential?: CredentialRecord;
  joinedAt: number;
  revokedAt?: number;
  /** The agent's outbox id; seqs are counted per stream. */
  streamId?: string;
  /** The highest seq of the stream stored durably. */
  ackedSeq: number;
  lastSeen?: number;
  /** Whether the credential was ever used to connect (then the name cannot join again). */
  connected: boolean;
  /** The generation of the node's desired state (docs/protocol.md, "Desired state"). */
  desiredGeneration: number;
  /** The highest generation the agent acknowledged as stored and applied. */
  ackedGeneration: number;
  /** A hash of the content of `desiredGeneration`, to tell a change after a restart. */
  desiredHash?: string;
  /** What the agent announced in its last hello (AGENT_FEATURES). */
  features?: string[];
  node?: Node;
}

/** The queued progress of a node: everything but its Node object. */
export type NodeProgress = Omit<NodeRecord, "node">;

export interface LoadedState {
  operatorHash?: string;
  joinTokens: JoinTokenRecord[];
  nodes: NodeRecord[];
  pods: { node: string; pod: Pod }[];
  events: { node: string; event: Event }[];
}

/** The SQLite code of a failed statement ("SQLITE_FULL"), if it is one. */
function sqliteCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && code.startsWith("SQLITE_") ? code : undefined;
}

/**
 * The Status to answer `request` with when the store could not write what it needed: 507 when
 * the data disk is full (SQLITE_FULL), 503 when the database cannot be written for another reason
 * (I/O error, read-only, locked); undefined for any other error.
 */
export function storeWriteStatus(err: unknown, request: string): StatusError | undefined {
  const code = sqliteCode(err);
  if (code === undefined) return undefined;
  const why = (err as Error).message;
  if (code === "SQLITE_FULL")
    return new StatusError(
      "InsufficientStorage",
      `${request} was not stored: the hub's data disk is full (${why}); reads keep working, free space in the hub's data folder and try again`,
    );
  if (/^SQLITE_(IOERR|READONLY|BUSY|LOCKED|CANTOPEN)/.test(code))
    return new StatusError(
      "ServiceUnavailable",
      `${request} was not stored: the hub's database cannot be written (${code}: ${why}); reads keep working, try again`,
    );
  return undefined;
}

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

export class HubStore {
  private readonly db: Database;
  /** The database, for the deploy store's tables (deploy/store.ts). */
  readonly database: Database;
  private progress = new Map<string, NodeProgress>();
  private nodeObjects = new Map<string, Node>();
  private pods = new Map<string, { node: string; uid: string; pod: Pod | null }>();
  private events = new Map<string, { node: string; name: string; event: Event | null }>();
  private clearedPods = new Set<string>();

  /** Opens (creating) the store at `path`; ":memory:" for tests. */
  constructor(path: string) {
    if (path !== ":memory:") ownerOnly(path);
    this.db = new Database(path, { create: true, strict: true });
    this.database = this.db;
    this.db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;");
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

  load(): LoadedState {
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

  saveOperatorHash(hash: string): void {
    this.db.query("INSERT OR REPLACE INTO meta (key, value) VALUES ('operator', ?)").run(hash);
  }

  saveJoinToken(t: JoinTokenRecord): void {
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

  /** A join: the token's use count and the node's record in one transaction. */
  saveJoinNow(t: JoinTokenRecord, progress: NodeProgress): void {
    this.queueProgress(progress);
    this.db.transaction(() => {
      this.saveJoinToken(t);
      this.flush();
    })();
  }

  /** Writes a node's identity and progress now (join, revoke), with what is queued before it.
   * When the write fails, nothing of `progress` stays queued (the caller was told it failed). */
  saveNodeNow(progress: NodeProgress): void {
    const before = this.progress.get(progress.name);
    this.queueProgress(progress);
    try {
      this.flush();
    } catch (err) {
      if (before === undefined) this.progress.delete(progress.name);
      else this.progress.set(progress.name, before);
      throw err;
    }
  }

  /** Removes node `name` with its pods and events now, and whatever of it is queued. */
  forgetNodeNow(name: string): void {
    this.progress.delete(name);
    this.nodeObjects.delete(name);
    this.clearedPods.delete(name);
    for (const [key, p] of this.pods) if (p.node === name) this.pods.delete(key);
    for (const [key, e] of this.events) if (e.node === name) this.events.delete(key);
    this.flush();
    this.db.transaction(() => {
      this.db.query("DELETE FROM pods WHERE node = ?").run(name);
      this.db.query("DELETE FROM events WHERE node = ?").run(name);
      this.db.query("DELETE FROM nodes WHERE name = ?").run(name);
    })();
  }

  // ---- queued until flush() ----

  queueProgress(progress: NodeProgress): void {
    this.progress.set(progress.name, progress);
  }

  queueNode(name: string, node: Node): void {
    this.nodeObjects.set(name, node);
  }

  /** A pod's newest state (`null`: deleted). */
  queuePod(node: string, uid: string, pod: Pod | null): void {
    this.pods.set(`${node}\u0000${uid}`, { node, uid, pod });
  }

  /** Forgets every stored pod of `node` (a new stream), before the pods queued after this. */
  queueClearPods(node: string): void {
    for (const [key, p] of this.pods) if (p.node === node) this.pods.delete(key);
    this.clearedPods.add(node);
  }

  queueEvent(node: string, name: string, event: Event | null): void {
    this.events.set(`${node}\u0000${name}`, { node, name, event });
  }

  /** How many writes are waiting for flush(). */
  pending(): number {
    return (
      this.progress.size +
      this.nodeObjects.size +
      this.pods.size +
      this.events.size +
      this.clearedPods.size
    );
  }

  /** Writes everything queued in one transaction; when it fails, everything stays queued. */
  flush(): void {
    if (this.pending() === 0) return;
    const { progress, nodeObjects, pods, events, clearedPods: cleared } = this;
    this.progress = new Map();
    this.nodeObjects = new Map();
    this.pods = new Map();
    this.events = new Map();
    this.clearedPods = new Set();
    try {
      this.write(progress, nodeObjects, cleared, pods, events);
    } catch (err) {
      this.progress = new Map([...progress, ...this.progress]);
      this.nodeObjects = new Map([...nodeObjects, ...this.nodeObjects]);
      this.pods = new Map([...pods, ...this.pods]);
      this.events = new Map([...events, ...this.events]);
      this.clearedPods = new Set([...cleared, ...this.clearedPods]);
      throw err;
    }
  }

  private write(
    progress: Map<string, NodeProgress>,
    nodeObjects: Map<string, Node>,
    cleared: Set<string>,
    pods: HubStore["pods"],
    events: HubStore["events"],
  ): void {
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

  /** Writes what is queued and closes the database, even when the write fails (the data disk
   * full): then returns how many queued writes were not stored (agents resend them). */
  close(): { unstored: number; error?: unknown } {
    try {
      this.flush();
      return { unstored: 0 };
    } catch (error) {
      return { unstored: this.pending(), error };
    } finally {
      this.db.close();
    }
  }
}
