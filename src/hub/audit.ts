// The hub's audit log of every exec, attach and port-forward into a device (docs/kubectl.md, "Audit"):
// who asked (the operator, from which address, with which client), into which device, pod and
// container, what command or ports, when it started and ended, and how it ended. Written to
// the hub's database when the session starts and again when it ends, so a session cut by a hub
// crash still shows who opened it. Release pushes and deletes (docs/hub-releases.md) are
// recorded once, when they are done or refused, and so are the wanted releases set or canceled
// for a node (docs/hub-releases.md, "Updating one node"), and every agent rollout created,
// changed, paused, resumed, undone or deleted.
import type { Database } from "bun:sqlite";

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

const SCHEMA = `CREATE TABLE IF NOT EXISTS audit (id INTEGER PRIMARY KEY AUTOINCREMENT, record TEXT NOT NULL)`;

const rfc3339 = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

export class AuditLog {
  constructor(
    private readonly db: Database,
    private readonly now: () => number,
  ) {
    this.db.exec(SCHEMA);
  }

  /** Records a session that starts now; returns its id. */
  start(entry: AuditStart): number {
    const record = { ...entry, started: rfc3339(this.now()) };
    const r = this.db
      .query("INSERT INTO audit (record) VALUES (?) RETURNING id")
      .get(JSON.stringify(record)) as { id: number };
    return r.id;
  }

  /** Records an action that is over as it starts (a release push or delete), with its outcome. */
  record(entry: AuditStart, outcome: string): void {
    const at = rfc3339(this.now());
    const record = { ...entry, started: at, ended: at, outcome };
    this.db.query("INSERT INTO audit (record) VALUES (?)").run(JSON.stringify(record));
  }

  /** Records how session `id` ended. */
  end(id: number, outcome: string, extra: Partial<Pick<AuditRecord, "connections">> = {}): void {
    const row = this.db.query("SELECT record FROM audit WHERE id = ?").get(id) as {
      record: string;
    } | null;
    if (row === null) return;
    const record = { ...JSON.parse(row.record), ...extra, ended: rfc3339(this.now()), outcome };
    this.db.query("UPDATE audit SET record = ? WHERE id = ?").run(JSON.stringify(record), id);
  }

  /** The most recent records (newest last), of `node` when given. */
  list(filter: { node?: string; limit?: number } = {}): AuditRecord[] {
    const rows = this.db
      .query("SELECT id, record FROM audit ORDER BY id DESC LIMIT ?")
      .all(filter.node === undefined ? (filter.limit ?? 100) : 100_000) as {
      id: number;
      record: string;
    }[];
    const records = rows
      .map((r) => ({ id: r.id, ...JSON.parse(r.record) }) as AuditRecord)
      .filter((r) => filter.node === undefined || r.node === filter.node)
      .slice(0, filter.limit ?? 100);
    return records.reverse();
  }
}
