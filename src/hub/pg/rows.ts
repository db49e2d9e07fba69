// Multi-row statements in chunks: one INSERT … ON CONFLICT or DELETE for up to CHUNK rows, so a
// flush of thousands of rows is a few round trips in one transaction, each well under the
// protocol's 65,535 parameters.
import type { SQL } from "bun";

/** Rows per statement. */
const CHUNK = 500;

/** A table's columns, each with the cast its parameter takes ("json": the object's text). */
export interface Columns {
  table: string;
  /** The primary key's columns. */
  key: string[];
  /** Every column, key first, with its SQL type. */
  types: Record<string, "text" | "json">;
}

function chunks<T>(rows: T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < rows.length; i += CHUNK) out.push(rows.slice(i, i + CHUNK));
  return out;
}

/** "($1::text, $2::text::json), ($3…)" for `rows` rows of `types`, and their parameters. */
function values(types: string[], rows: unknown[][]): { text: string; params: unknown[] } {
  const params: unknown[] = [];
  const tuples = rows.map((row) => {
    const cells = types.map((t, i) => {
      params.push(row[i]);
      return t === "json" ? `$${params.length}::text::json` : `$${params.length}::${t}`;
    });
    return `(${cells.join(", ")})`;
  });
  return { text: tuples.join(", "), params };
}

/** Inserts `rows` (values in the order of `c.types`), replacing the other columns of a row whose
 * key is there already. */
export async function upsertRows(tx: SQL, c: Columns, rows: unknown[][]): Promise<void> {
  const cols = Object.keys(c.types);
  const set = cols.filter((col) => !c.key.includes(col)).map((col) => `${col} = excluded.${col}`);
  for (const part of chunks(rows)) {
    const v = values(Object.values(c.types), part);
    await tx.unsafe(
      `INSERT INTO ${c.table} (${cols.join(", ")}) VALUES ${v.text} ON CONFLICT (${c.key.join(", ")}) DO UPDATE SET ${set.join(", ")}`,
      v.params,
    );
  }
}

/** Deletes the rows of `c.table` whose key is one of `keys` (values in the order of `c.key`). */
export async function deleteRows(tx: SQL, c: Columns, keys: unknown[][]): Promise<void> {
  for (const part of chunks(keys)) {
    const v = values(
      c.key.map(() => "text"),
      part,
    );
    await tx.unsafe(
      `DELETE FROM ${c.table} WHERE (${c.key.join(", ")}) IN (VALUES ${v.text})`,
      v.params,
    );
  }
}

/** Sets column `col` (json) of the existing rows of `c.table` keyed by one text column. */
export async function updateJson(
  tx: SQL,
  c: Columns,
  col: string,
  rows: unknown[][],
): Promise<void> {
  const [key] = c.key;
  for (const part of chunks(rows)) {
    const v = values(["text", "json"], part);
    await tx.unsafe(
      `UPDATE ${c.table} SET ${col} = v.val FROM (VALUES ${v.text}) AS v(k, val) WHERE ${c.table}.${key} = v.k`,
      v.params,
    );
  }
}
