// Agent releases in PostgreSQL (src/hub/releases/store-postgres.ts, migration 6) on a throwaway
// cluster (scripts/lib/postgres.ts; needs root and Debian's postgresql): the release store
// contract (test/lib/release-store-contract.ts) with a store per replica on one database, the
// gzip kept in chunks of 1 MiB, and a whole read that ends in an error when a stored chunk was
// changed behind the hub's back.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { SQL } from "bun";
import { PostgresCluster } from "../../scripts/lib/postgres.ts";
import { connectPostgres } from "../../src/hub/pg/connect.ts";
import type { Releases } from "../../src/hub/releases/store.ts";
import { CHUNK, PostgresReleaseStore } from "../../src/hub/releases/store-postgres.ts";
import { postgresBacking } from "../lib/postgres-backing.ts";
import {
  manifestOf,
  randomExecutable,
  readBack,
  releaseStoreContract,
} from "../lib/release-store-contract.ts";

let cluster: PostgresCluster;
let dir: string;

beforeAll(async () => {
  cluster = await PostgresCluster.start();
  dir = mkdtempSync(join(tmpdir(), "fleetlet-releases-pg-"));
}, 60_000);

afterAll(async () => {
  await cluster?.remove();
  rmSync(dir, { recursive: true, force: true });
});

let replicas = 0;
/** A replica's store: its own incoming folder, the shared database. */
const replicaStore = (pool: { sql: SQL; size: number }): Releases =>
  new PostgresReleaseStore(pool, join(dir, `replica-${++replicas}`, ".incoming"));

releaseStoreContract("PostgreSQL", () => postgresBacking(cluster, replicaStore));

test("the gzip is stored in 1 MiB chunks; a changed chunk ends a whole read with an error", async () => {
  const url = await cluster.createDatabase();
  const sql = await connectPostgres(url, { max: 2 });
  try {
    const store = replicaStore({ sql, size: 2 });
    const bytes = randomExecutable(3 * CHUNK + 1000);
    await store.push("0.3.0", "arm64", manifestOf(bytes, "0.3.0", "arm64"), new Response(bytes));
    const r = await store.get("0.3.0", "arm64");
    if (r === undefined) throw new Error("not stored");
    const chunks = (await sql.unsafe(
      "SELECT idx, length(data) AS n FROM release_chunks ORDER BY idx",
    )) as { idx: number; n: number }[];
    expect(chunks.map((c) => c.idx)).toEqual([0, 1, 2, 3]);
    expect(chunks.slice(0, 3).every((c) => c.n === CHUNK)).toBe(true);
    expect(chunks.reduce((t, c) => t + c.n, 0)).toBe(r.compressedSize);
    await sql.unsafe(
      "UPDATE release_chunks SET data = set_byte(data, 10, (get_byte(data, 10) + 1) % 256) WHERE idx = 2",
    );
    await expect(readBack(store, r)).rejects.toThrow("the stored gzip's sha256 is");
    await sql.unsafe("DELETE FROM release_chunks WHERE idx = 1");
    await expect(readBack(store, r, 0, CHUNK + 5)).rejects.toThrow(
      "release 0.3.0/arm64: chunk 1 is missing",
    );
    expect(await store.delete("0.3.0")).toEqual(["0.3.0/arm64"]);
    expect((await sql.unsafe("SELECT count(*)::int AS n FROM release_chunks"))[0].n).toBe(0);
  } finally {
    await sql.close();
  }
});
