// The hub's other stores on PostgreSQL (deploy, node updates, agent rollouts, the audit log:
// src/hub/stores-postgres.ts): each store's contract suite (test/lib/*-store-contract.ts) on a
// database of its own per test, and each against SQLite's implementation of the same interface:
// one scenario of writes run on both, read back through each store, must give the same answers
// (the audit log's order and limits included). And what only PostgreSQL has: migration 2 on an
// empty database and on one the fleet store had migrated and written, Secrets sealed in the
// server's rows, and writes after the server ended every session of the pool. Needs root and
// Debian's postgresql (scripts/setup installs it): a throwaway cluster of PostgreSQL 15 is
// started for this file (scripts/lib/postgres.ts) and removed after.
import { describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { SQL } from "bun";
import type { AuditEntry } from "../../src/hub/audit.ts";
import { PostgresAuditStore } from "../../src/hub/audit-postgres.ts";
import { SecretSealer } from "../../src/hub/deploy/sealing.ts";
import { openPostgresDeployStore } from "../../src/hub/deploy/store-postgres.ts";
import { MIGRATIONS, migrate } from "../../src/hub/pg/migrations.ts";
import { PostgresAgentRolloutStore } from "../../src/hub/rollouts/store-postgres.ts";
import { PostgresHubStore } from "../../src/hub/store-postgres.ts";
import { openPostgresStores } from "../../src/hub/stores-postgres.ts";
import { type HubStores, openSqliteStores } from "../../src/hub/stores-sqlite.ts";
import { PostgresUpdateStore } from "../../src/hub/updates/store-postgres.ts";
import { createLogger } from "../../src/util/log.ts";
import { auditStoreContract } from "../lib/audit-store-contract.ts";
import { deployStoreContract } from "../lib/deploy-store-contract.ts";
import { postgresForFile } from "../lib/postgres.ts";
import { postgresBacking } from "../lib/postgres-backing.ts";
import { deleteRollout, rolloutStoreContract } from "../lib/rollout-store-contract.ts";
import { deployScenario, rolloutScenario, updateScenario } from "../lib/stores-scenarios.ts";
import { updateStoreContract } from "../lib/update-store-contract.ts";
import { makePod } from "../unit/hubclient/fixtures.ts";

const quiet = createLogger({ level: "error" });
const cluster = postgresForFile();

deployStoreContract("PostgreSQL", () => {
  const sealer = new SecretSealer([randomBytes(32)]);
  return postgresBacking(cluster(), (pool) => openPostgresDeployStore(pool, sealer, quiet));
});
updateStoreContract("PostgreSQL", () =>
  postgresBacking(cluster(), (p) => new PostgresUpdateStore(p)),
);
rolloutStoreContract("PostgreSQL", () =>
  postgresBacking(cluster(), (p) => new PostgresAgentRolloutStore(p)),
);
auditStoreContract("PostgreSQL", () =>
  postgresBacking(cluster(), (p) => new PostgresAuditStore(p)),
);

/** Runs `fn` on fresh PostgreSQL stores (a database of their own) and on fresh SQLite ones. */
async function onBoth<T>(
  fn: (s: HubStores) => Promise<T>,
  sealer?: SecretSealer,
): Promise<{ postgres: T; sqlite: T }> {
  const url = await cluster().createDatabase();
  const pg = await openPostgresStores(url, sealer, quiet, { connectionTimeout: 2 });
  const lite = openSqliteStores(":memory:", sealer, quiet);
  try {
    return { postgres: await fn(pg), sqlite: await fn(lite) };
  } finally {
    await pg.hub.close();
    await lite.hub.close();
    await cluster().dropDatabase(url);
  }
}

const session = (node: string, command: string[]): AuditEntry => ({
  ...{ kind: "exec", user: "operator", client: "127.0.0.1", userAgent: "kubectl/v1.31" },
  ...{ node, namespace: "default", pod: `web-${node}`, container: "web", command },
  started: "2026-12-07T00:00:00Z",
});

describe("the hub's other stores on PostgreSQL answer as on SQLite", () => {
  test("the deploy store: objects, revisions, rollout records, assignments, deletes", async () => {
    const r = await onBoth(deployScenario, new SecretSealer([randomBytes(32)]));
    expect(r.postgres).toEqual(r.sqlite);
  });

  test("node updates: a batch's later change of a node wins, a null version removes", async () => {
    const r = await onBoth(updateScenario);
    expect(r.postgres).toEqual(r.sqlite);
  });

  test("agent rollouts: saved, replaced, deleted, loaded by name", async () => {
    const r = await onBoth(rolloutScenario);
    expect(r.postgres).toEqual(r.sqlite);
  });

  test("the audit log: ids that grow, updates in place, the newest first, per node, limits", async () => {
    const r = await onBoth(async ({ audit }) => {
      const ids: number[] = [];
      for (let i = 0; i < 6; i++)
        ids.push(await audit.append(session(i % 2 === 0 ? "cam-1" : "cam-2", ["sh", `-c${i}`])));
      // A string holding NUL, which jsonb would refuse, kept as it was written.
      ids.push(await audit.append(session("cam-1", ["printf", "a\u0000b"])));
      // A refused request's device, from its path, may hold NUL too.
      const odd = await audit.append(session("cam\u0000x", ["true"]));
      await audit.update(ids[1] as number, { ended: "2026-12-07T00:01:00Z", outcome: "exit 3" });
      await audit.update(ids[6] as number, { outcome: "error: \u0000", connections: 2 });
      await audit.update(9_999, { outcome: "exit 0" });
      return {
        grows: ids.every((id, i) => i === 0 || id > (ids[i - 1] as number)),
        first: ids[0],
        all: await audit.newest(100),
        two: await audit.newest(2),
        one: await audit.newest(1, "cam-2"),
        cam1: await audit.newest(3, "cam-1"),
        none: await audit.newest(5, "cam-9"),
        odd: { id: odd, records: await audit.newest(5, "cam\u0000x") },
      };
    });
    expect(r.postgres.grows).toBe(true);
    expect(r.postgres.all).toHaveLength(8);
    expect(r.postgres.all[1]?.command).toEqual(["printf", "a\u0000b"]);
    expect(r.postgres.odd.records.map((a) => a.id)).toEqual([r.postgres.odd.id]);
    expect(r.postgres).toEqual(r.sqlite);
  });
});

describe("the hub's other stores, on PostgreSQL only", () => {
  test("migration 2 applies on a database the fleet store migrated (1) and wrote, keeping its rows", async () => {
    const url = await cluster().createDatabase();
    const sql = new SQL(url, { max: 1 });
    try {
      expect(await migrate(sql, MIGRATIONS.slice(0, 1))).toEqual([1]);
      const fleet = new PostgresHubStore({ sql, size: 1 });
      await fleet.saveOperatorHash("op-hash");
      const stores = await openPostgresStores(url, undefined, quiet);
      try {
        expect((await stores.hub.load()).operatorHash).toBe("op-hash");
        await stores.updates.write([{ node: "cam-1", version: "0.3.0", setAt: 7 }]);
        expect(await stores.updates.load()).toEqual([
          { node: "cam-1", version: "0.3.0", setAt: 7 },
        ]);
        const versions = await sql.unsafe("SELECT version FROM schema_migrations ORDER BY version");
        expect(versions.map((v: { version: number }) => v.version)).toEqual(
          MIGRATIONS.map((m) => m.version),
        );
      } finally {
        await stores.hub.close();
      }
    } finally {
      await sql.close();
      await cluster().dropDatabase(url);
    }
  });

  test("a Secret's row holds its sealed body; a rotated key seals it again on open", async () => {
    const url = await cluster().createDatabase();
    const [oldKey, newKey] = [randomBytes(32), randomBytes(32)];
    const body = (sql: SQL) =>
      sql.unsafe("SELECT body FROM objects WHERE kind = 'Secret'") as Promise<{ body: string }[]>;
    const sql = new SQL(url, { max: 1 });
    try {
      const secret = {
        ...{ kind: "Secret", namespace: "default", name: "db" },
        object: { kind: "Secret", metadata: { name: "db" }, data: { password: "aHVudGVyMg==" } },
      };
      const first = await openPostgresStores(url, new SecretSealer([oldKey]), quiet);
      await first.deploy.putObject(secret, 4);
      await first.hub.close();
      const [sealed] = await body(sql);
      expect(sealed?.body).not.toContain("aHVudGVyMg");
      const rotated = new SecretSealer([newKey, oldKey]);
      expect(rotated.keyIdOf(sealed?.body ?? "")).not.toBe(rotated.sealingKeyId);
      const second = await openPostgresStores(url, rotated, quiet);
      try {
        expect(rotated.keyIdOf((await body(sql))[0]?.body ?? "")).toBe(rotated.sealingKeyId);
        expect((await second.deploy.load()).objects).toEqual([secret]);
      } finally {
        await second.hub.close();
      }
    } finally {
      await sql.close();
      await cluster().dropDatabase(url);
    }
  });

  test("the change log's rows and a node's claim are dated by the hub's clock, not the system's", async () => {
    const url = await cluster().createDatabase();
    const at = 1_234_567;
    const stores = await openPostgresStores(url, undefined, quiet, { now: () => at });
    const admin = new SQL(url, { max: 1 });
    try {
      const progress = { name: "cam-1", credentialHash: "c", hubLabels: {}, joinedAt: 5 };
      const session = { ackedSeq: 0, streamId: "s1", connected: true };
      await stores.hub.saveNodeNow({
        ...progress,
        ...session,
        desiredGeneration: 0,
        ackedGeneration: 0,
      });
      await stores.sessions?.claim("cam-1", "hub-a");
      stores.hub.queuePod("cam-1", "u1", makePod("u1"));
      await stores.hub.flush();
      const rows = (await admin.unsafe("SELECT DISTINCT at::text AS at FROM changes")) as {
        at: string;
      }[];
      expect(rows.map((r) => Number(r.at))).toEqual([at]);
      const taken = (await admin.unsafe("SELECT taken_at::text AS t FROM node_sessions")) as {
        t: string;
      }[];
      expect(taken.map((r) => Number(r.t))).toEqual([at]);
    } finally {
      await admin.close();
      await stores.hub.close();
      await cluster().dropDatabase(url);
    }
  });

  test("a pass logs what it decided, in its order: assignments (removed ones as tombstones), pruned revisions, statuses", async () => {
    const url = await cluster().createDatabase();
    const stores = await openPostgresStores(url, undefined, quiet);
    const admin = new SQL(url, { max: 1 });
    try {
      const status = { ...{ desiredNumberScheduled: 1, currentNumberScheduled: 1 } };
      const shown = {
        ...{ dsUid: "u1", phase: "Complete" as const, since: 5, record: { stableHash: "h2" } },
        status: { ...status, numberMisscheduled: 0, numberReady: 1, observedGeneration: 2 },
      };
      await stores.deploy.writePass({
        rollouts: [{ dsUid: "u1", record: { stableHash: "h2" } }],
        assignments: [
          { dsUid: "u1", node: "cam-1", hash: "h2", at: 5 },
          { dsUid: "u1", node: "cam-2", hash: null, at: 5 },
        ],
        pruned: [{ dsUid: "u1", hash: "h1" }],
        statuses: [shown],
      });
      const rows = (await admin.unsafe(
        "SELECT kind, key, deleted, object FROM changes ORDER BY rv",
      )) as { kind: string; key: string; deleted: boolean; object: string | null }[];
      expect(rows.map((r) => [r.kind, r.key, r.deleted])).toEqual([
        ["dsassign", "u1/cam-1", false],
        ["dsassign", "u1/cam-2", true],
        ["dsprune", "u1/h1", true],
        ["dsstatus", "u1", false],
      ]);
      expect(rows[0]?.object).toBe("h2");
      const { dsUid: _, ...body } = shown;
      expect(JSON.parse(rows[3]?.object ?? "null")).toEqual(body);
    } finally {
      await admin.close();
      await stores.hub.close();
      await cluster().dropDatabase(url);
    }
  });

  test("what a replica shares of an agent's update is kept a row a node, each kind in its columns, and goes with the node", async () => {
    const url = await cluster().createDatabase();
    const stores = await openPostgresStores(url, undefined, quiet);
    try {
      const updates = stores.updates;
      const status = { type: "update.status", version: "0.2.0", phase: "failed" } as const;
      const healthy = { ...status, phase: "healthy" } as const;
      expect(await updates.loadReports?.()).toEqual([]);
      await updates.share?.("cam-1", { offered: "0.2.0", at: 10 });
      await updates.share?.("cam-1", { status, at: 11 });
      await updates.share?.("cam-1", { agent: { version: "0.1.0", updates: true } });
      await updates.share?.("cam-1", { status: healthy, at: 12 });
      await updates.share?.("cam-2", { agent: { version: "0.1.0", updates: false } });
      const byNode = async () =>
        ((await updates.loadReports?.()) ?? []).sort((x, y) => x.node.localeCompare(y.node));
      expect(await byNode()).toEqual([
        {
          node: "cam-1",
          status: { status: healthy, at: 12 },
          offered: { version: "0.2.0", at: 10 },
          agent: { version: "0.1.0", updates: true },
        },
        { node: "cam-2", agent: { version: "0.1.0", updates: false } },
      ]);
      const progress = { name: "cam-1", credentialHash: "c", hubLabels: {}, joinedAt: 5 };
      await stores.hub.saveNodeNow({
        ...progress,
        ...{ ackedSeq: 0, connected: false, desiredGeneration: 0, ackedGeneration: 0 },
      });
      await stores.hub.forgetNodeNow("cam-1");
      expect((await byNode()).map((r) => r.node)).toEqual(["cam-2"]);
    } finally {
      await stores.hub.close();
      await cluster().dropDatabase(url);
    }
  });

  test("writes after the server ended every session of the pool are stored once", async () => {
    const url = await cluster().createDatabase();
    const stores = await openPostgresStores(url, undefined, quiet, { max: 3 });
    const admin = new SQL(cluster().url(), { max: 1 });
    try {
      // Three connections in the pool, then each ended by the server (57P01 at its next use).
      await Promise.all([1, 2, 3].map(() => stores.audit.newest(1)));
      const db = new URL(url).pathname.slice(1);
      await admin.unsafe(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
        [db],
      );
      const id = await stores.audit.append(session("cam-1", ["true"]));
      await deleteRollout(stores.rollouts, "none");
      await stores.updates.write([{ node: "cam-1", version: "0.3.0", setAt: 1 }]);
      expect((await stores.audit.newest(10)).map((r) => r.id)).toEqual([id]);
      expect(await stores.updates.load()).toHaveLength(1);
    } finally {
      await admin.close();
      await stores.hub.close();
      await cluster().dropDatabase(url);
    }
  });
});
