// What a failed PostgreSQL write means for the hub's answer: Bun's SQL client gives a server's
// error its SQLSTATE in `errno` (code "ERR_POSTGRES_SERVER_ERROR") and a connection that could not
// be made or was lost a code of its own ("ERR_POSTGRES_CONNECTION_REFUSED", ...).

/** Why a write to PostgreSQL failed, when the hub can tell the client to try again. */
export interface PostgresWriteFailure {
  /** "full": the database's disk (53100); "unreachable": no connection to the server;
   * "shutdown": the server is stopping or starting; "unavailable": out of connections or
   * memory, or read-only (a standby). */
  kind: "full" | "unreachable" | "shutdown" | "unavailable";
  /** The SQLSTATE or the client's code. */
  code: string;
}

/** The client's codes of a connection that could not be made or was lost. */
const CONNECTION_CODES = new Set([
  "ERR_POSTGRES_CONNECTION_CLOSED",
  "ERR_POSTGRES_CONNECTION_FAILED",
  "ERR_POSTGRES_CONNECTION_REFUSED",
  "ERR_POSTGRES_CONNECTION_TIMEOUT",
  "ERR_POSTGRES_IDLE_TIMEOUT",
  "ERR_POSTGRES_LIFETIME_TIMEOUT",
]);

/** Classifies a SQLSTATE: class 08 (connection), 57P01-57P03 (shutting down, starting),
 * 53100 (disk full), the rest of class 53 (resources) and 25006 (read-only transaction). */
function bySqlState(state: string): PostgresWriteFailure["kind"] | undefined {
  if (state === "53100") return "full";
  if (state.startsWith("08")) return "unreachable";
  if (/^57P0[123]$/.test(state)) return "shutdown";
  if (state.startsWith("53") || state === "25006") return "unavailable";
  return undefined;
}

/** The failure `err` is, if it is a PostgreSQL failure the client may retry. */
export function postgresWriteFailure(err: unknown): PostgresWriteFailure | undefined {
  if ((err as { name?: unknown } | null)?.name !== "PostgresError") return undefined;
  const { code, errno } = err as { code?: unknown; errno?: unknown };
  if (typeof code === "string" && CONNECTION_CODES.has(code)) return { kind: "unreachable", code };
  if (code !== "ERR_POSTGRES_SERVER_ERROR" || typeof errno !== "string") return undefined;
  const kind = bySqlState(errno);
  return kind === undefined ? undefined : { kind, code: errno };
}

/**
 * Whether `err` says the session the statement was sent on is gone (the server ended it: 57P01,
 * 57P02; or the socket closed) — as every idle connection of a pool is after the server
 * restarted. The hub's writes are idempotent (rows set to a value, deletes), so such a write is
 * tried again on another connection; a connection that cannot be made is not retried.
 */
export function sessionLost(err: unknown): boolean {
  if ((err as { name?: unknown } | null)?.name !== "PostgresError") return false;
  const { code, errno } = err as { code?: unknown; errno?: unknown };
  if (code === "ERR_POSTGRES_CONNECTION_CLOSED") return true;
  return code === "ERR_POSTGRES_SERVER_ERROR" && (errno === "57P01" || errno === "57P02");
}
