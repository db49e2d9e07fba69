// The hub's store on PostgreSQL (src/hub/store-postgres.ts): the store contract
// (test/lib/store-contract.ts) on a database of its own per test, and what only a shared database
// has: two stores migrating one empty database at once, a server that stops under a store, a
// database whose disk is full (a tablespace on a small tmpfs), a large flush. Needs root and Debian's postgresql (scripts/setup installs it): a throwaway
// cluster of PostgreSQL 15 is started for this file (scripts/lib/postgres.ts) and removed after.
import { describe, expect, test } from "bun:test";
import { chownSync, statSync } from "node:fs";
import { join } from "node:path";
import { SQL } from "bun";
import type { Pod } from "../../src/api/types.ts";
import { MIGRATIONS, migrate } from "../../src/hub/pg/migrations.ts";
import { storeWriteStatus } from "../../src/hub/store.ts";
import { openHubStore, postgresForFile } from "../lib/postgres.ts";
import { fill, free, mountTmpfs, unmount } from "../lib/small-fs.ts";
import { storeContract } from "../lib/store-contract.ts";
import { makeEvent, makePod } from "../unit/hubclient/fixtures.ts";

const cluster = postgresForFile();

// A connection that cannot be made fails after 2 s, not the default 10.
const open = openHubStore;

storeContract("PostgreSQL", async () => {
  const url = await cluster().createDatabase();
  return { open: () => open(url), remove: () => cluster().dropDatabase(url) };
});

const progress = (name: string, ackedSeq = 0) => ({
  ...{ name, credentialHash: `cred-${name}`, hubLabels: {}, joinedAt: 5, ackedSeq },
  ...{ connected: true, desiredGeneration: 0, ackedGeneration: 0 },
});

describe("the hub store on PostgreSQL", () => {
  test("two processes migrating one empty database at once end with one schema, migrated once", async () => {
    const url = await cluster().createDatabase();
    // The first migration holds the lock a while, so that the second caller meets it.
    const slow = [
      { version: 1, name: "wait", statements: ["SELECT pg_sleep(0.3)"] },
      ...MIGRATIONS.map((m) => ({ ...m, version: m.version + 1 })),
    ];
    const pools = [new SQL(url, { max: 1 }), new SQL(url, { max: 1 })];
    try {
      const applied = await Promise.all(pools.map((sql) => migrate(sql, slow)));
      const versions = slow.map((m) => m.version);
      expect(applied.map((a) => a.length).sort()).toEqual([0, versions.length]);
      expect(applied.flat()).toEqual(versions);
      const [sql] = pools as [SQL];
      const rows = await sql.unsafe("SELECT version FROM schema_migrations ORDER BY version");
      expect(rows.map((r: { version: number }) => r.version)).toEqual(versions);
      const tables = await sql.unsafe(
        "SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public' AND tablename = 'nodes'",
      );
      expect(tables[0].n).toBe(1);
    } finally {
      for (const sql of pools) await sql.close();
      await cluster().dropDatabase(url);
    }
  });

  test("two stores opened on one empty database at once both work on the one schema", async () => {
    const url = await cluster().createDatabase();
    const [a, b] = await Promise.all([open(url), open(url)]);
    try {
      await a.saveNodeNow(progress("cam-1"));
      expect((await b.load()).nodes.map((n) => n.name)).toEqual(["cam-1"]);
    } finally {
      await a.close();
      await b.close();
      await cluster().dropDatabase(url);
    }
  });

  test("a store whose server stopped rejects writes with 503 and keeps what was queued", async () => {
    const url = await cluster().createDatabase();
    const a = await open(url);
    try {
      await a.saveNodeNow(progress("cam-1"));
      a.queueProgress(progress("cam-1", 8));
      a.queuePod("cam-1", "u1", makePod("u1"));
      a.queueEvent("cam-1", "e1", makeEvent("e1"));
      await cluster().stopServer();
      const flushed = await a.flush().then(
        () => undefined,
        (err: unknown) => err,
      );
      const status = storeWriteStatus(flushed, "flush");
      expect(status?.code).toBe(503);
      expect(status?.message).toContain("the hub cannot reach its PostgreSQL database");
      console.log(`a flush with the server stopped: ${status?.message}`);
      expect(a.pending()).toBe(3);
      // A write the hub answers for fails the same way, and does not stay queued.
      const saved = await a.saveNodeNow(progress("cam-2")).then(
        () => undefined,
        (e: unknown) => e,
      );
      const saveStatus = storeWriteStatus(saved, "POST /join");
      expect(saveStatus?.code).toBe(503);
      expect(saveStatus?.message).toStartWith("POST /join was not stored: ");
      console.log(`a join with the server stopped: ${saveStatus?.message}`);
      expect(a.pending()).toBe(3);
      await cluster().startServer();
      await a.flush();
      expect(a.pending()).toBe(0);
      const b = await open(url);
      const loaded = await b.load();
      await b.close();
      expect(loaded.nodes.map((n) => [n.name, n.ackedSeq])).toEqual([["cam-1", 8]]);
      expect(loaded.pods.map((p) => p.pod.metadata.uid)).toEqual(["u1"]);
      expect(loaded.events.map((e) => e.event.metadata.name)).toEqual(["e1"]);
    } finally {
      await cluster().startServer();
      await a.close();
      await cluster().dropDatabase(url);
    }
  }, 30_000);

  test("a flush the database's full disk refuses is answered 507 and kept; it is written once there is space", async () => {
    // A database of its own in a tablespace on a small tmpfs, filled to the last byte.
    const dir = join(cluster().dir, "small");
    mountTmpfs(dir, 24);
    const { uid, gid } = statSync(cluster().dir);
    chownSync(dir, uid, gid);
    const admin = new SQL(cluster().url(), { max: 1 });
    const name = `small_${process.pid}`;
    await admin.unsafe(`CREATE TABLESPACE small LOCATION '${dir}'`);
    await admin.unsafe(`CREATE DATABASE ${name} TABLESPACE small`);
    const url = cluster().url(name);
    const a = await open(url);
    try {
      await a.saveNodeNow(progress("cam-1"));
      const filler = fill(dir);
      for (let i = 0; i < 200; i++) a.queuePod("cam-1", `u${i}`, makePod(`u${i}`));
      const err = await a.flush().then(
        () => undefined,
        (e: unknown) => e,
      );
      const status = storeWriteStatus(err, "flush");
      expect(status?.code).toBe(507);
      console.log(`a flush on a full disk: ${status?.message}`);
      expect(a.pending()).toBe(200);
      free(filler);
      await a.flush();
      expect((await a.load()).pods.length).toBe(200);
    } finally {
      await a.close();
      await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.unsafe("DROP TABLESPACE IF EXISTS small");
      await admin.close();
      unmount(dir);
    }
  }, 60_000);

  test("a flush of 5,000 pods of 100 nodes, and one updating them, is written and given back by load()", async () => {
    const url = await cluster().createDatabase();
    const a = await open(url);
    try {
      const pods: Pod[] = [];
      for (let n = 0; n < 100; n++) {
        a.queueProgress(progress(`cam-${n}`, 50));
        for (let i = 0; i < 50; i++) {
          const pod = makePod(`u-${n}-${i}`);
          pod.metadata.labels = { app: "web", node: `cam-${n}` };
          pods.push(pod);
          a.queuePod(`cam-${n}`, pod.metadata.uid as string, pod);
        }
      }
      const t0 = performance.now();
      await a.flush();
      const ms = performance.now() - t0;
      console.log(`flush of 5,000 pods and 100 nodes' progress: ${ms.toFixed(0)} ms`);
      // Again, each pod updated, as agents' reports mostly are.
      for (const pod of pods) {
        pod.status = { phase: "Running", podIP: "10.0.0.9" };
        a.queuePod(pod.metadata.labels?.node as string, pod.metadata.uid as string, pod);
      }
      const t2 = performance.now();
      await a.flush();
      console.log(`a second flush, updating them: ${(performance.now() - t2).toFixed(0)} ms`);
      const t1 = performance.now();
      const loaded = await a.load();
      console.log(`load() of them: ${(performance.now() - t1).toFixed(0)} ms`);
      expect(loaded.nodes.length).toBe(100);
      expect(loaded.pods.length).toBe(5_000);
      const byUid = new Map(loaded.pods.map((p) => [p.pod.metadata.uid, p.pod]));
      expect(byUid.get("u-99-49")).toEqual(pods.at(-1) as Pod);
    } finally {
      await a.close();
      await cluster().dropDatabase(url);
    }
  }, 60_000);
});
