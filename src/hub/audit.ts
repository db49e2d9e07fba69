// The hub's audit log of every exec, attach and port-forward into a device (docs/kubectl.md, "Audit"):
// who asked (the operator, from which address, with which client), into which device, pod and
// container, what command or ports, when it started and ended, and how it ended. Written to
// the hub's store when the session starts and again when it ends, so a session cut by a hub
// crash still shows who opened it. Release pushes and deletes (docs/hub-releases.md) are
// recorded once, when they are done or refused, and so are the wanted releases set or canceled
// for a node (docs/hub-releases.md, "Updating one node"), and every agent rollout created,
// changed, paused, resumed, undone or deleted.
export interface AuditRecord {
  id: number;
  kind: "exec" | "attach" | "portforward" | "release" | "update" | "agentrollout";
  /** Who: "operator" (the hub has one operator identity). */
  user: string;
  /** The client's address and user agent. */
  client: string;
  userAgent: string;
  /** The device, namespace and pod of a session ("" for a release). */
  node: string;
  namespace: string;
  pod: string;
  /** A release's action, and which release ("0.2.0/amd64"; a delete of every arch: "0.2.0");
   * a node update's action ("set", "cancel") and the wanted version in `release`. */
  action?: "push" | "delete" | "set" | "cancel" | "create" | "change" | "pause" | "resume" | "undo";
  release?: string;
  /** An agent rollout's name (its version in `release`). */
  rollout?: string;
  container?: string;
  /** exec: the command (attach has none: it joins the container's process); portforward: the
   * ports. */
  command?: string[];
  ports?: number[];
  tty?: boolean;
  /** RFC 3339. */
  started: string;
  ended?: string;
  /** How it ended: "exit 0", "exit 3", "error: …", "client left", or (while open) absent. */
  outcome?: string;
  /** Port-forward: the connections made through it. */
  connections?: number;
}

export type AuditStart = Omit<AuditRecord, "id" | "started" | "ended" | "outcome">;

/** A record as it is stored, before the store gave it its id. */
export type AuditEntry = Omit<AuditRecord, "id">;

/** Where the audit log is kept (SQLite: audit-sqlite.ts). Every write is stored when its
 * promise resolves. */
export interface AuditStore {
  /** Appends `entry`; its id, higher than every id before it. */
  append(entry: AuditEntry): Promise<number>;
  /** Sets `fields` of record `id` (how it ended), keeping its others; nothing when there is
   * no such record. */
  update(id: number, fields: Partial<AuditEntry>): Promise<void>;
  /** The `limit` newest records (of `node` when given), newest first. */
  newest(limit: number, node?: string): Promise<AuditRecord[]>;
}

const rfc3339 = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

export class AuditLog {
  constructor(
    private readonly store: AuditStore,
    private readonly now: () => number,
  ) {}

  /** Records a session that starts now; its id, once stored. */
  start(entry: AuditStart): Promise<number> {
    return this.store.append({ ...entry, started: rfc3339(this.now()) });
  }

  /** Records an action that is over as it starts (a release push or delete), with its outcome. */
  async record(entry: AuditStart, outcome: string): Promise<void> {
    const at = rfc3339(this.now());
    await this.store.append({ ...entry, started: at, ended: at, outcome });
  }

  /** Records how session `id` ended. An end that cannot be stored (the data disk full) leaves
   * the session open in the log, as a hub that crashed would. */
  async end(
    id: number,
    outcome: string,
    extra: Partial<Pick<AuditRecord, "connections">> = {},
  ): Promise<void> {
    await this.store.update(id, { ...extra, ended: rfc3339(this.now()), outcome }).catch(() => {});
  }

  /** The most recent records (newest last), of `node` when given. */
  async list(filter: { node?: string; limit?: number } = {}): Promise<AuditRecord[]> {
    return (await this.store.newest(filter.limit ?? 100, filter.node)).reverse();
  }
}
