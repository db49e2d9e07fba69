// Who holds a node among hub replicas (docs/hub-replicas.md, "Agents and replicas"): the replica
// that welcomes a node's agent takes the node with a new epoch, and its writes of the node's
// reports carry that epoch; once another replica took the node, they are dropped. A single hub
// holds every node and has none of this (only the PostgreSQL store implements it).
// Invariants: a node's epoch only grows; a replica writes a node's reports only while the epoch
// it took the node with is the stored one.
import type { Node } from "../api/node.ts";
import type { Event, Pod } from "../api/types.ts";
import type { NodeProgress } from "./store.ts";

/** What the store holds of a node, read in the transaction that took it. */
export interface StoredNode {
  progress: NodeProgress;
  node?: Node;
  pods: Pod[];
  events: Event[];
}

export interface NodeClaim {
  /** The epoch this replica now holds the node with. */
  epoch: number;
  /** The node as stored, when another replica held it since this one did (or this one never
   * did): what this replica holds of it in memory may be stale, and what it had queued of the
   * node was dropped. Absent: this replica held it last, with the epoch before. */
  stored?: StoredNode;
}

export interface NodeSessions {
  /** Takes node `name` for `replica` in one transaction: the epoch moves on by one, and the
   * node is read as stored when this replica may hold a stale view of it. Rejects when the
   * store cannot be written (nothing taken). */
  claim(name: string, replica: string): Promise<NodeClaim>;
  /** Another replica took `name` with `epoch`: true when this replica held it with an older
   * epoch and has let it go (its queued reports of it will not be written). */
  release(name: string, epoch: number): boolean;
  /** Calls `fn` with each node a flush found taken by another replica (what this replica had of
   * it was not written). */
  onLost(fn: (name: string) => void): void;
}

/** The fields of a node's progress that the agent's session moves: only the replica holding the
 * node writes them; another replica writing the node's progress (an operator's change of
 * labels, a revoke) keeps the stored ones. */
const SESSION_FIELDS = [
  "streamId",
  "ackedSeq",
  "lastSeen",
  "connected",
  "features",
  "ackedGeneration",
  "desiredReport",
  "clockSkewMs",
  "secretsWithheld",
] as const;
/** And those moved over the connection with the agent (a rotated credential). */
const CREDENTIAL_FIELDS = [
  "credentialHash",
  "credentialIssuedAt",
  "credentialExpiresAt",
  "pendingCredential",
] as const;

/** And whether the node is online: the holder's to store (or the leader's, releasing the nodes
 * of a dead holder: pg/replicas.ts). */
const ONLINE_FIELDS = ["online", "offlineSince"] as const;

type Field =
  | (typeof SESSION_FIELDS)[number]
  | (typeof CREDENTIAL_FIELDS)[number]
  | (typeof ONLINE_FIELDS)[number];

/** Sets `fields` of `to` to those of `from` (absent in `from`: removed from `to`). */
function copyFields(to: NodeProgress, from: NodeProgress, fields: readonly Field[]): void {
  const out = to as unknown as Record<string, unknown>;
  for (const f of fields) {
    if (from[f] === undefined) delete out[f];
    else out[f] = from[f];
  }
}

/** `mine` (written by a replica that does not hold the node) with the holder's fields of
 * `stored`. */
export function keepHolderFields(mine: NodeProgress, stored: NodeProgress): NodeProgress {
  const out = { ...mine };
  copyFields(out, stored, [...SESSION_FIELDS, ...CREDENTIAL_FIELDS, ...ONLINE_FIELDS]);
  return out;
}

/** The stamp of hub labels set now on `rec` (NodeRecord.hubLabelsAt): the hub's time, or one
 * above the stamp this replica saw when its clock is behind the replica that set that one. */
export function labelStamp(rec: Pick<NodeProgress, "hubLabelsAt">, now: number): number {
  return Math.max(now, (rec.hubLabelsAt ?? 0) + 1);
}

/** Sets the session fields of `rec` to those of `stored` (a replica taking a node from another
 * keeps its own identity fields, which follow the identity's own changes). */
export function adoptSession(rec: NodeProgress, stored: NodeProgress): void {
  copyFields(rec, stored, SESSION_FIELDS);
}
