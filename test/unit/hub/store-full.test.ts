// The hub on a full data disk: SQLite refuses writes with SQLITE_FULL (made here with
// PRAGMA max_page_count, the same error a full filesystem gives), and then takes them again.
// Nothing queued is lost, agents are acknowledged only for what is stored, operators' writes
// fail with a 507 Status, and everything resumes with no restart.
import { Database } from "bun:sqlite";
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ConfigObject } from "../../../src/api/pod-objects.ts";
import { DeferredDeployWrites } from "../../../src/hub/deploy/deferred-store.ts";
import { ConfigObjectCatalog } from "../../../src/hub/deploy/objects.ts";
import { SqliteDeployStore } from "../../../src/hub/deploy/store-sqlite.ts";
import { Fleet } from "../../../src/hub/fleet.ts";
import { Flusher } from "../../../src/hub/flusher.ts";
import { storeWriteStatus } from "../../../src/hub/store.ts";
import { openHubDatabase, SqliteHubStore } from "../../../src/hub/store-sqlite.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { createLogger, nullLogger } from "../../../src/util/log.ts";
import { settle } from "../../lib/hub-updates.ts";
import { makeEvent, makePod } from "../hubclient/fixtures.ts";

let dirs: string[] = [];
afterEach(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  dirs = [];
});

function tempDb(): string {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-hub-full-"));
  dirs.push(dir);
  return join(dir, "hub.db");
}

/** Fills the database: no page beyond those it has. */
function fill(db: Database): void {
  const { page_count } = db.query("PRAGMA page_count").get() as { page_count: number };
  db.exec(`PRAGMA max_page_count = ${page_count}`);
}
function free(db: Database): void {
  db.exec("PRAGMA max_page_count = 1073741823");
}

/** The hub's store on a database at `path`, and the database (to fill and free). */
function opened(path: string): { db: Database; store: SqliteHubStore } {
  const db = openHubDatabase(path);
  return { db, store: new SqliteHubStore(db) };
}

/** A payload that needs new pages. */
const big = (name: string) => ({ ...makeEvent(name), message: "x".repeat(20_000) });

async function hubParts(path: string) {
  const clock = new FakeClock();
  const { db, store } = opened(path);
  await store.saveNodeNow({
    name: "cam-1",
    credentialHash: "h",
    hubLabels: {},
    joinedAt: 0,
    ackedSeq: 0,
    connected: true,
    desiredGeneration: 0,
    ackedGeneration: 0,
  });
  const fleet = new Fleet(
    {
      store,
      maxEventsPerNode: 50,
      offlineAfterMs: 30_000,
      onChange: () => {},
      now: () => clock.now(),
    },
    await store.load(),
  );
  return { clock, db, store, fleet };
}

describe("the hub store on a full disk", () => {
  test("a failed flush keeps everything queued; the next one that works writes it all", async () => {
    const path = tempDb();
    const { db, store } = opened(path);
    store.queuePod("cam-1", "u1", makePod("u1"));
    store.queueEvent("cam-1", "e1", big("e1"));
    fill(db);
    await expect(store.flush()).rejects.toThrow("database or disk is full");
    expect(store.pending()).toBe(2);
    store.queueEvent("cam-1", "e2", big("e2"));
    await expect(store.flush()).rejects.toThrow("database or disk is full");
    expect(store.pending()).toBe(3);
    free(db);
    await store.flush();
    expect(store.pending()).toBe(0);
    await store.close();
    const again = await new SqliteHubStore(path).load();
    expect(again.pods.map((p) => p.pod.metadata.uid)).toEqual(["u1"]);
    expect(again.events.map((e) => e.event.metadata.name).sort()).toEqual(["e1", "e2"]);
  });

  test("closing on a full disk closes the database and counts what was not stored", async () => {
    const { db, store } = opened(tempDb());
    store.queueEvent("cam-1", "e1", big("e1"));
    fill(db);
    expect(await store.close()).toMatchObject({ unstored: 1 });
  });

  test("a node saved now whose write fails leaves nothing of it queued", async () => {
    const { db, store } = opened(tempDb());
    fill(db);
    const progress = {
      ...{ name: "cam-9", credentialHash: "h".repeat(4000), hubLabels: {}, joinedAt: 0 },
      ...{ ackedSeq: 0, connected: false, desiredGeneration: 0, ackedGeneration: 0 },
    };
    await expect(store.saveNodeNow(progress)).rejects.toThrow("database or disk is full");
    expect(store.pending()).toBe(0);
  });

  test("the flusher acknowledges nothing while writes fail, and everything once they work, by itself", async () => {
    const { clock, db, store, fleet } = await hubParts(tempDb());
    const acks: [string, number][] = [];
    const flusher = new Flusher({
      ...{ fleet, store, clock, log: nullLogger, intervalMs: 20 },
      ack: (n, s) => acks.push([n, s]),
    });
    fill(db);
    fleet.ingest("cam-1", { type: "event", seq: 1, event: big("a") });
    flusher.markDirty("cam-1");
    clock.step(20);
    await settle();
    fleet.ingest("cam-1", { type: "event", seq: 2, event: big("b") });
    flusher.markDirty("cam-1");
    clock.step(1000);
    await settle();
    expect(acks).toEqual([]);
    expect(flusher.health()).toMatchObject({ failedFlushes: 2 });
    expect(flusher.health().lastError).toContain("database or disk is full");
    // Reads keep working from memory.
    expect(fleet.allEvents().length).toBe(2);
    free(db);
    clock.step(2000);
    await settle();
    expect(acks).toEqual([["cam-1", 2]]);
    expect(flusher.health().failingSince).toBeUndefined();
  });

  test("every failed flush is logged: an error the first time and once a minute, debug between", async () => {
    const { clock, db, store, fleet } = await hubParts(tempDb());
    const lines: string[] = [];
    const log = createLogger({ level: "debug", write: (l) => lines.push(l), now: () => 0 });
    const flusher = new Flusher({ fleet, store, clock, log, intervalMs: 20, ack: () => {} });
    fill(db);
    fleet.ingest("cam-1", { type: "event", seq: 1, event: big("a") });
    flusher.markDirty("cam-1");
    // Retries after 1, 2, 4, 8, 16, 30 s: the sixth failure is 31 s in, the seventh 61 s in.
    // (Each retry is set once the failed write's promise settled.)
    for (const ms of [20, 1000, 2000, 4000, 8000, 16_000, 30_000]) {
      clock.step(ms);
      await settle();
    }
    const said = lines.map((l) => [
      / (ERROR|DEBUG) /.exec(l)?.[1],
      /failedFlushes=(\d+)/.exec(l)?.[1],
    ]);
    expect(said).toEqual([
      ["ERROR", "1"],
      ...["2", "3", "4", "5", "6"].map((n) => ["DEBUG", n]),
      ["ERROR", "7"],
    ]);
    expect(lines.every((l) => l.includes("hub store write failed"))).toBe(true);
  });

  test("an operator's ConfigMap is refused with 507 and not kept; taken once space returns", async () => {
    const db = new Database(tempDb());
    db.exec("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)");
    const store = new SqliteDeployStore(db);
    let rv = 0;
    const catalog = new ConfigObjectCatalog(store, await store.load(), {
      next: () => ++rv,
      used: () => {},
    });
    const cm = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "settings", namespace: "default" },
      data: { big: "x".repeat(50_000) },
    } as ConfigObject;
    fill(db);
    let thrown: unknown;
    try {
      await catalog.apply(cm, 0);
    } catch (err) {
      thrown = err;
    }
    const status = storeWriteStatus(thrown, "POST /api/v1/namespaces/default/configmaps");
    expect(status?.code).toBe(507);
    expect(status?.toStatus()).toMatchObject({
      kind: "Status",
      reason: "InsufficientStorage",
      code: 507,
    });
    expect(status?.message).toStartWith(
      "POST /api/v1/namespaces/default/configmaps was not stored: the hub's data disk is full",
    );
    expect(catalog.get("ConfigMap/default/settings")).toBeUndefined();
    free(db);
    expect((await catalog.apply(cm, 0)).result).toBe("created");
  });

  test("storeWriteStatus() maps SQLite's write failures and leaves other errors alone", async () => {
    const sqlite = (code: string) => Object.assign(new Error("boom"), { code });
    const cases: [unknown, number | undefined][] = [
      [sqlite("SQLITE_FULL"), 507],
      [sqlite("SQLITE_IOERR_WRITE"), 503],
      [sqlite("SQLITE_READONLY"), 503],
      [sqlite("SQLITE_CONSTRAINT_PRIMARYKEY"), undefined],
      [Object.assign(new Error("x"), { code: "ENOSPC" }), undefined],
      [new Error("plain"), undefined],
    ];
    for (const [err, code] of cases)
      expect({
        err: (err as { code?: string }).code,
        code: storeWriteStatus(err, "PUT /x")?.code,
      }).toEqual({
        err: (err as { code?: string }).code,
        code,
      });
  });

  test("storeWriteStatus() maps PostgreSQL's failures as Bun's client gives them and leaves others alone", () => {
    const server = (state: string) =>
      Object.assign(new Error(`failed with ${state}`), {
        ...{ name: "PostgresError", code: "ERR_POSTGRES_SERVER_ERROR", errno: state },
      });
    const client = (code: string) =>
      Object.assign(new Error("Failed to connect"), { name: "PostgresError", code });
    const cases: [Error & { code: string }, number | undefined][] = [
      [server("53100"), 507],
      [server("57P01"), 503],
      [server("57P03"), 503],
      [server("08006"), 503],
      [server("53300"), 503],
      [server("25006"), 503],
      [client("ERR_POSTGRES_CONNECTION_REFUSED"), 503],
      [client("ERR_POSTGRES_CONNECTION_CLOSED"), 503],
      [client("ERR_POSTGRES_CONNECTION_TIMEOUT"), 503],
      [server("23505"), undefined],
      [server("22012"), undefined],
      [client("ERR_POSTGRES_SYNTAX_ERROR"), undefined],
      [Object.assign(new Error("x"), { code: "ERR_POSTGRES_CONNECTION_REFUSED" }), undefined],
    ];
    for (const [err, code] of cases) {
      const status = storeWriteStatus(err, "PUT /x");
      expect({
        err: `${err.code} ${(err as { errno?: string }).errno}`,
        code: status?.code,
      }).toEqual({
        err: `${err.code} ${(err as { errno?: string }).errno}`,
        code,
      });
    }
    expect(storeWriteStatus(server("53100"), "POST /api/v1/pods")?.message).toBe(
      "POST /api/v1/pods was not stored: the disk of the hub's PostgreSQL database is full (53100: failed with 53100); reads keep working, free space on the database's disk and try again",
    );
  });

  test("rollout progress that cannot be written is kept and written by the next pass that can", async () => {
    const db = new Database(tempDb());
    db.exec("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)");
    const inner = new SqliteDeployStore(db);
    const store = new DeferredDeployWrites(inner, nullLogger, () => 0);
    const hash = "h".repeat(20_000);
    const pass = (dsUid: string) => ({
      rollouts: [{ dsUid, record: { stableHash: hash } }],
      assignments: [{ dsUid, node: "cam-1", hash, at: 1 }],
      pruned: [],
      statuses: [],
    });
    fill(db);
    await store.writePass(pass("ds1"));
    await store.writePass(pass("ds2"));
    expect(store.waiting).toBe(4);
    await store.deleteObject({ kind: "DaemonSet", namespace: "default", name: "b" }, 1, "ds2");
    expect(store.waiting).toBe(2);
    free(db);
    await store.writePass({ rollouts: [], assignments: [], pruned: [], statuses: [] });
    expect(store.waiting).toBe(0);
    const stored = await inner.load();
    expect(stored.assignments.map((a) => [a.dsUid, a.node])).toEqual([["ds1", "cam-1"]]);
    expect(stored.rollouts.map((r) => r.dsUid)).toEqual(["ds1"]);
  });
});
