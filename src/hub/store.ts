// The hub's durable store of its fleet (docs/hub-replicas.md, "The store"): one interface, with
// SQLite (store-sqlite.ts) its embedded implementation and PostgreSQL (store-postgres.ts) the
// shared one of hub replicas. Identity changes (tokens, joins, revokes) are written at once; what
// agents report is queued and written in one transaction per flush, coalesced by key
// (report-queue.ts), so that ingest costs a map update per message.
// Everything is loaded into memory at start. The interface is asynchronous, as a database
// across the network is; SQLite's implementation does its work before its promise is returned.
// A write that fails (the data disk is full) rejects and loses nothing queued: the queue is put
// back, newer entries winning, and written by the next flush that works.
import type { Node } from "../api/node.ts";
import { StatusError } from "../api/status.ts";
import type { Event, Pod } from "../api/types.ts";
import { type PostgresWriteFailure, postgresWriteFailure } from "./pg/errors.ts";

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

/** What an agent said of its desired state, beyond the generation (desired.ack). */
export interface DesiredReport {
  refused?: { generation?: number; reason: string };
  conflicts: { pod: string; uid: string; message: string }[];
}

/** What the hub knows of a node that joined. */
export interface NodeRecord {
  name: string;
  credentialHash: string;
  /** Labels given at join (join token's and the join request's). */
  hubLabels: Record<string, string>;
  /** When `hubLabels` were last set (hub time, above the stamp the setter saw): a replica's write
   * of the node keeps labels stored with a later stamp (pg/operator-fields.ts). */
  hubLabelsAt?: number;
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
  /** What the agent last said of its desired state beyond the generation (desired.ack), when it
   * refused it or found conflicts: stored with the node, so that the leader's DaemonSet passes
   * see it whichever replica holds the node. */
  desiredReport?: DesiredReport;
  /** The skew of the device's clock (ms, device − hub) as its holder last showed it (it moved by
   * 2 s or more): stored with the node, so that every replica shows it. */
  clockSkewMs?: number;
  /** The device was last sent its desired state without its Secrets (its connection neither TLS
   * nor loopback): stored with the node, so that the leader's DaemonSet passes show
   * SecretsWithheld whichever replica holds the node. */
  secretsWithheld?: true;
  /** Whether the replica holding the node had it online, and since when not, as that replica
   * last stored it: what other replicas show (hub replicas; a single hub does not read it). */
  online?: boolean;
  offlineSince?: number;
  node?: Node;
}

/** The queued progress of a node: everything but its Node object. */
export type NodeProgress = Omit<NodeRecord, "node">;

export interface LoadedState {
  operatorHash?: string;
  /** PostgreSQL: the change log's highest rv as of what was loaded (pg/changes.ts). */
  changesRv?: number;
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

/** What a PostgreSQL failure of each kind means, for the hub's answer. */
const POSTGRES_WHY: Record<PostgresWriteFailure["kind"], string> = {
  full: "the disk of the hub's PostgreSQL database is full",
  unreachable: "the hub cannot reach its PostgreSQL database",
  shutdown: "the hub's PostgreSQL server is shutting down or starting",
  unavailable: "the hub's PostgreSQL database cannot take the write now",
};

/** storeWriteStatus() of a PostgreSQL failure. */
function postgresWriteStatus(err: unknown, request: string): StatusError | undefined {
  const failure = postgresWriteFailure(err);
  if (failure === undefined) return undefined;
  const why = `${POSTGRES_WHY[failure.kind]} (${failure.code}: ${(err as Error).message})`;
  if (failure.kind === "full")
    return new StatusError(
      "InsufficientStorage",
      `${request} was not stored: ${why}; reads keep working, free space on the database's disk and try again`,
    );
  return new StatusError(
    "ServiceUnavailable",
    `${request} was not stored: ${why}; reads keep working, try again`,
  );
}

/**
 * The Status to answer `request` with when the store could not write what it needed: 507 when
 * the data disk is full (SQLITE_FULL, PostgreSQL's 53100), 503 when the database cannot be
 * written for another reason (SQLite: I/O error, read-only, locked; PostgreSQL: no connection,
 * the server shutting down, out of connections, a read-only standby); undefined for any other
 * error.
 */
export function storeWriteStatus(err: unknown, request: string): StatusError | undefined {
  const code = sqliteCode(err);
  if (code === undefined) return postgresWriteStatus(err, request);
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

/** The fleet's durable store. Writes of one store are not run concurrently by the hub: flush()
 * is called by one loop, and the `…Now` writes by handlers that await them. */
export interface HubStore {
  /** Everything stored, to hold in memory. */
  load(): Promise<LoadedState>;
  saveOperatorHash(hash: string): Promise<void>;
  /** Stores a new join token, or one revoked. A shared store never takes a count of uses lower
   * than the stored one, nor a revoke back (another replica may have counted a use since). */
  saveJoinToken(t: JoinTokenRecord): Promise<void>;
  /** The join token whose hash is `hash` as stored now: with replicas, one made, used or
   * revoked at another replica since this one loaded. Absent where this hub is the store's one
   * writer (SQLite: what it loaded and wrote is what is stored). */
  readJoinToken?(hash: string): Promise<JoinTokenRecord | undefined>;
  /** Every join token as stored now, oldest first: with replicas, those made, used or revoked
   * at other replicas too. Absent where this hub is the store's one writer. */
  readJoinTokens?(): Promise<JoinTokenRecord[]>;
  /** A join at `now`: the token's use count and the node's record (with what is queued) in one
   * transaction. When it fails nothing of `progress` stays queued. A shared store counts the use
   * on the stored row and refuses it (StatusError Unauthorized) when that row is revoked,
   * expired or used up, whatever another replica counted since `t` was read. */
  saveJoinNow(t: JoinTokenRecord, progress: NodeProgress, now: number): Promise<void>;
  /** Writes a node's identity and progress now (revoke, a new credential), with what is queued.
   * When the write fails, nothing of `progress` stays queued (the caller was told it failed). */
  saveNodeNow(progress: NodeProgress): Promise<void>;
  /** Removes node `name` with its pods and events now, and whatever of it is queued. */
  forgetNodeNow(name: string): Promise<void>;
  /** Queues a node's progress (its identity fields and seqs), written by the next flush.
   * `seqOnly`: only its acknowledged seq changed (a PostgreSQL store then logs no change of the
   * node for other replicas, unless other writes of it are queued). */
  queueProgress(progress: NodeProgress, seqOnly?: boolean): void;
  queueNode(name: string, node: Node): void;
  /** A pod's newest state (`null`: deleted). */
  queuePod(node: string, uid: string, pod: Pod | null): void;
  /** Forgets every stored pod of `node` (a new stream), before the pods queued after this. */
  queueClearPods(node: string): void;
  queueEvent(node: string, name: string, event: Event | null): void;
  /** How many writes are waiting for flush(). */
  pending(): number;
  /** Writes everything queued when it is called (later queued writes wait for the next flush),
   * in one transaction; when it fails, everything stays queued. */
  flush(): Promise<void>;
  /** Writes what is queued and closes, even when the write fails (the data disk full): then
   * says how many queued writes were not stored (agents resend them). */
  close(): Promise<{ unstored: number; error?: unknown }>;
}
