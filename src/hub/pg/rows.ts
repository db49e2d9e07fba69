// Multi-row statements in chunks: one INSERT … ON CONFLICT, UPDATE or DELETE for up to CHUNK rows,
// each column passed as one array and read back into rows with unnest(), so a flush of thousands
// of rows is a few round trips in one transaction, and each statement's text is the same
// whatever its number of rows (the server plans it once per connection). Measured with the upsert
// of 5,000 pods of 190 bytes in one transaction on a loaded 2-core machine: 180 ms (median of 6),
// against 350 ms with a VALUES list of 1,500 parameters a statement.
import type { SQL } from "bun";

/** Rows per statement. */
const CHUNK = 500;

/** A table's columns, each with its type; every value is passed as text ("json": the object's
 * text, "bigint" and "integer": the number's) and cast to the type. */
export interface Columns {
  table: string;
  /** The primary key's columns. */
  key: string[];
  /** Every column, key first, with its SQL type. */
  types: Record<string, "text" | "json" | "bigint" | "integer">;
}

function chunks<T>(rows: T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < rows.length; i += CHUNK) out.push(rows.slice(i, i + CHUNK));
  return out;
}

/** The columns of `rows`, as arrays (one parameter each). */
const columnsOf = (rows: unknown[][], n: number): unknown[][] =>
  Array.from({ length: n }, (_, i) => rows.map((r) => r[i]));

/** "unnest($1::text[], $2::text[]) AS r(a, b)": the rows of `cols`, each column passed as text. */
const unnested = (cols: string[]): string =>
  `unnest(${cols.map((_, i) => `$${i + 1}::text[]`).join(", ")}) AS r(${cols.join(", ")})`;

/** Inserts `rows` (values in the order of `c.types`), replacing the other columns of a row whose
 * key is there already. */
export async function upsertRows(tx: SQL, c: Columns, rows: unknown[][]): Promise<void> {
  const cols = Object.keys(c.types);
  const select = cols.map((col) => (c.types[col] === "text" ? col : `${col}::${c.types[col]}`));
  const set = cols.filter((col) => !c.key.includes(col)).map((col) => `${col} = excluded.${col}`);
  const text = `INSERT INTO ${c.table} (${cols.join(", ")}) SELECT ${select.join(", ")} FROM ${unnested(cols)} ON CONFLICT (${c.key.join(", ")}) DO UPDATE SET ${set.join(", ")}`;
  for (const part of chunks(rows)) await tx.unsafe(text, columnsOf(part, cols.length));
}

/** Deletes the rows of `c.table` whose key is one of `keys` (values in the order of `c.key`). */
export async function deleteRows(tx: SQL, c: Columns, keys: unknown[][]): Promise<void> {
  const match = c.key.map((k) => `${c.table}.${k} = r.${k}`).join(" AND ");
  const text = `DELETE FROM ${c.table} USING ${unnested(c.key)} WHERE ${match}`;
  for (const part of chunks(keys)) await tx.unsafe(text, columnsOf(part, c.key.length));
}

/** Sets column `col` (json) of the existing rows of `c.table` keyed by one text column. */
export async function updateJson(tx: SQL, c: Columns, col: string, rows: unknown[][]) {
  const [key] = c.key;
  const text = `UPDATE ${c.table} SET ${col} = r.val::json FROM ${unnested(["k", "val"])} WHERE ${c.table}.${key} = r.k`;
  for (const part of chunks(rows)) await tx.unsafe(text, columnsOf(part, 2));
}

/** The last of each key's values: one statement may not touch a row twice. */
export function lastByKey<T>(items: readonly T[], key: (t: T) => string): T[] {
  return [...new Map(items.map((t) => [key(t), t])).values()];
}
