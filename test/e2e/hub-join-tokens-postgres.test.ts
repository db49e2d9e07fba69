// Join tokens across hub replicas, at the store (src/hub/identity.ts over store-postgres.ts): two
// PostgresHubStore instances on one database, each with its Identity, stand for two replicas. A
// token made at one after the other loaded is listed and revoked at the other; a one-use token
// raced by two joins at the two replicas passes once, however the joins interleave (the use is one
// conditional UPDATE of the stored row). Needs root and Debian's postgresql (a throwaway
// cluster, scripts/lib/postgres.ts).
import { describe, expect, test } from "bun:test";
import { Identity } from "../../src/hub/identity.ts";
import type { NodeRecord } from "../../src/hub/store.ts";
import type { PostgresHubStore } from "../../src/hub/store-postgres.ts";
import { openHubStore, postgresForFile } from "../lib/postgres.ts";

const cluster = postgresForFile();

const HOUR = 3_600_000;

/** A replica's identity on its own store of database `url`, from what the store holds now. */
async function replica(url: string): Promise<{ store: PostgresHubStore; identity: Identity }> {
  const store = await openHubStore(url);
  const loaded = await store.load();
  const nodes = new Map<string, NodeRecord>(loaded.nodes.map((n) => [n.name, n]));
  return { store, identity: new Identity({ store, nodes }, loaded) };
}

describe("join tokens across replicas", () => {
  test("a token made at A after B loaded is listed at B, revoked at B, then refused at A", async () => {
    const url = await cluster().createDatabase();
    const a = await replica(url);
    const b = await replica(url);
    try {
      const made = await a.identity.createJoinToken(HOUR, { site: "x" }, Date.now(), 2);
      const listed = await b.identity.listJoinTokens();
      expect(listed.map((t) => [t.id, t.maxUses, t.used, t.revoked])).toEqual([
        [made.id, 2, 0, false],
      ]);
      expect(await b.identity.revokeJoinToken(made.id)).toBe(true);
      expect(await b.identity.revokeJoinToken("no-such-id")).toBe(false);
      const refused = a.identity.join({ joinToken: made.token, nodeName: "cam-1" }, Date.now());
      await expect(refused).rejects.toThrow("join token revoked");
      expect((await a.identity.listJoinTokens())[0]?.revoked).toBe(true);
    } finally {
      await Promise.all([a.store.close(), b.store.close()]);
    }
  }, 30_000);

  test("a one-use token raced by joins at two replicas passes exactly once, 25 rounds", async () => {
    const url = await cluster().createDatabase();
    const a = await replica(url);
    const b = await replica(url);
    try {
      for (let round = 0; round < 25; round++) {
        const made = await a.identity.createJoinToken(HOUR, {}, Date.now(), 1);
        // B reads the token (and its count) before either join, so both start from used = 0.
        await b.identity.listJoinTokens();
        const joins = await Promise.allSettled(
          [a, b].map((r, i) =>
            r.identity.join({ joinToken: made.token, nodeName: `cam-${round}-${i}` }, Date.now()),
          ),
        );
        const passed = joins.filter((j) => j.status === "fulfilled");
        expect(passed.length).toBe(1);
        const failed = joins.find((j) => j.status === "rejected");
        expect(String((failed as PromiseRejectedResult).reason)).toContain("already used");
        const stored = (await a.store.readJoinTokens()).find((t) => t.id === made.id);
        expect(stored?.used).toBe(1);
      }
      const nodes = (await a.store.load()).nodes.map((n) => n.name);
      expect(nodes.length).toBe(25);
    } finally {
      await Promise.all([a.store.close(), b.store.close()]);
    }
  }, 120_000);
});
