// copyStores() (src/hub/migrate.ts) between two SQLite databases in memory: what the target
// loads equals what the source held (a resourceVersion counter with no object left included),
// and a target that holds a hub's data, or part of one, is refused before anything is written.
import { describe, expect, test } from "bun:test";
import { copyStores, loadSnapshot, MigrateRefused } from "../../../src/hub/migrate.ts";
import type { JoinTokenRecord } from "../../../src/hub/store.ts";
import { type HubStores, openSqliteStores } from "../../../src/hub/stores-sqlite.ts";
import { createLogger } from "../../../src/util/log.ts";

const quiet = createLogger({ level: "error" });
const open = (): HubStores => openSqliteStores(":memory:", undefined, quiet);
const token: JoinTokenRecord = {
  ...{ id: "t1", hash: "h1", expiresAt: 2_000, labels: { site: "a" }, revoked: false },
  ...{ createdAt: 1_000, used: 1, maxUses: 3 },
};

/** A source with a token, a node, a wish, an audit record, and a deleted object (rv 7). */
async function source(operatorHash = true): Promise<HubStores> {
  const s = open();
  await s.hub.saveJoinToken(token);
  s.hub.queueProgress({
    ...{ name: "n1", credentialHash: "c1", hubLabels: {}, joinedAt: 5, ackedSeq: 4 },
    ...{ connected: true, desiredGeneration: 2, ackedGeneration: 1 },
  });
  await s.hub.flush();
  const cm = { kind: "ConfigMap", namespace: "default", name: "c" };
  await s.deploy.putObject({ ...cm, object: { kind: "ConfigMap", metadata: { name: "c" } } }, 6);
  await s.deploy.deleteObject(cm, 7);
  await s.updates.write([{ node: "n1", version: "1.2.3", setAt: 9 }]);
  await s.audit.append({
    ...{ kind: "release", user: "operator", client: "1.2.3.4", userAgent: "t", node: "" },
    ...{ namespace: "", pod: "", started: "2026-01-01T00:00:00Z" },
  } as never);
  if (operatorHash) await s.hub.saveOperatorHash("op");
  return s;
}

describe("copyStores", () => {
  test("the target loads what the source held, the resourceVersion of no object included", async () => {
    const from = await source();
    const to = open();
    await copyStores(from, to);
    const copied = await loadSnapshot(to);
    expect(copied).toEqual(await loadSnapshot(from));
    expect(copied.deploy.resourceVersion).toBe(7);
    expect(copied.fleet.operatorHash).toBe("op");
  });

  test("a target with a hub's data is refused, one with part of it too, and neither is written", async () => {
    const full = await source();
    const before = await loadSnapshot(full);
    const refused = copyStores(await source(), full);
    await expect(refused).rejects.toThrow(MigrateRefused);
    await expect(refused).rejects.toThrow("the database already holds a hub's data");
    expect(await loadSnapshot(full)).toEqual(before);
    const part = open();
    await part.hub.saveJoinToken(token);
    await expect(copyStores(await source(), part)).rejects.toThrow(
      "the database holds part of a hub's data (a migrate that did not finish?)",
    );
    expect((await loadSnapshot(part)).fleet.operatorHash).toBeUndefined();
  });

  test("check() refusing the source writes nothing; beforeLast runs before the operator hash", async () => {
    const to = open();
    const refuse = () => {
      throw new Error("no");
    };
    await expect(copyStores(await source(), to, { check: refuse })).rejects.toThrow("no");
    expect((await loadSnapshot(to)).fleet.joinTokens).toEqual([]);
    let hashThen: string | undefined = "unset";
    await copyStores(await source(), to, {
      beforeLast: async () => {
        hashThen = (await loadSnapshot(to)).fleet.operatorHash;
      },
    });
    expect(hashThen).toBeUndefined();
    expect((await loadSnapshot(to)).fleet.operatorHash).toBe("op");
  });
});
