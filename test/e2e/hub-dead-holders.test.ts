// A hub replica that died with the nodes it held (src/hub/dead-holders.ts, pg/replicas.ts), at
// the store: PostgresHubStore instances on one database stand for replicas. Each counts up its
// beat; the leader releases the nodes of a process whose beat stopped for longer than the
// threshold: their sessions end (the epoch moves on, so the dead holder's late flush is fenced)
// and those stored online are stored offline, logged for every replica. Needs root and
// Debian's postgresql (a throwaway cluster, scripts/lib/postgres.ts).
import { describe, expect, test } from "bun:test";
import { SQL } from "bun";
import type { Pod } from "../../src/api/types.ts";
import { BeatWatch, beatAndRelease, type DeadHolderOptions } from "../../src/hub/dead-holders.ts";
import { NotLeaderError } from "../../src/hub/leader.ts";
import { connectPostgres } from "../../src/hub/pg/connect.ts";
import { PostgresHubStore } from "../../src/hub/store-postgres.ts";
import { FakeClock } from "../../src/util/clock.ts";
import { createLogger } from "../../src/util/log.ts";
import { openHubStore, postgresForFile } from "../lib/postgres.ts";
import { makePod } from "../unit/hubclient/fixtures.ts";

const cluster = postgresForFile();

const open = openHubStore;

const progress = (name: string, ackedSeq: number, online: boolean) => ({
  ...{ name, credentialHash: `cred-${name}`, hubLabels: {}, joinedAt: 5, ackedSeq, streamId: "s1" },
  ...{ connected: true, desiredGeneration: 0, ackedGeneration: 0, online },
});

const podWith = (uid: string, image: string): Pod => {
  const p = makePod(uid);
  return { ...p, spec: { containers: [{ name: "web", image }] } };
};

/** Two stores on a new database; A holds cam-1, stored online with seq 3. */
async function aHolds(): Promise<{ url: string; a: PostgresHubStore; b: PostgresHubStore }> {
  const url = await cluster().createDatabase();
  const [a, b] = await Promise.all([open(url), open(url)]);
  await a.saveNodeNow(progress("cam-1", 0, false));
  await a.claim("cam-1", "hub-a");
  a.queueProgress(progress("cam-1", 3, true));
  await a.flush();
  return { url, a, b };
}

async function query<T>(url: string, text: string): Promise<T[]> {
  const sql = new SQL(url, { max: 1 });
  try {
    return (await sql.unsafe(text)) as T[];
  } finally {
    await sql.close();
  }
}

async function storedNode(url: string) {
  const s = await open(url);
  try {
    const loaded = await s.load();
    return { node: loaded.nodes.find((n) => n.name === "cam-1"), pods: loaded.pods };
  } finally {
    await s.close();
  }
}

const session = (url: string) =>
  query<{ replica: string; epoch: number; origin: string | null }>(
    url,
    "SELECT replica, epoch::int AS epoch, origin FROM node_sessions WHERE node = 'cam-1'",
  );

async function cleanup(url: string, ...stores: PostgresHubStore[]) {
  for (const s of stores) await s.close();
  await cluster().dropDatabase(url);
}

describe("replicas' beats and the release of a dead holder's nodes", () => {
  test("a dead holder's node is stored offline, logged, and its late flush is fenced", async () => {
    const { url, a, b } = await aHolds();
    const lostAtA: string[] = [];
    a.onLost((n) => lostAtA.push(n));
    try {
      expect((await session(url))[0]?.origin).toBe(a.origin);
      const watch = new BeatWatch();
      await a.beat("hub-a", 1);
      watch.observe(await b.beat("hub-b", 1), 0, 10_000);
      // A beats no more; B's later reads see A's beat unchanged past the threshold.
      watch.observe(await b.beat("hub-b", 2), 4000, 10_000);
      expect([...watch.dead([a.origin], 4000, 5000).keys()]).toEqual([]);
      watch.observe(await b.beat("hub-b", 3), 8000, 10_000);
      const dead = watch.dead(await b.holderOrigins(), 8000, 5000);
      expect([...dead.keys()]).toEqual([a.origin]);

      expect(await b.releaseDead(dead, 1234)).toEqual({ nodes: ["cam-1"], offline: ["cam-1"] });
      const { node } = await storedNode(url);
      expect([node?.online, node?.offlineSince, node?.ackedSeq]).toEqual([false, 1234, 3]);
      expect(await session(url)).toEqual([{ replica: "", epoch: 2, origin: null }]);
      const logged = await query<{ origin: string; object: string }>(
        url,
        "SELECT origin, object FROM changes WHERE kind = 'nodes' ORDER BY rv DESC LIMIT 1",
      );
      // Not B's own origin: B's view applies it as it applies other replicas' rows.
      expect(logged[0]?.origin).toBe(`${b.origin}/released`);
      expect(JSON.parse(logged[0]?.object ?? "{}").progress.online).toBe(false);
      const rows = await query<{ origin: string }>(url, "SELECT origin FROM replicas");
      expect(rows.map((r) => r.origin)).toEqual([b.origin]);

      // A was only stopped: its late writes of the node are dropped, and it lets the node go.
      a.queueProgress(progress("cam-1", 9, true));
      a.queuePod("cam-1", "u1", podWith("u1", "late"));
      await a.flush();
      expect(lostAtA).toEqual(["cam-1"]);
      const after = await storedNode(url);
      expect([after.node?.online, after.node?.ackedSeq, after.pods]).toEqual([false, 3, []]);
      // A non-holder's write of the node's progress keeps the offline state the leader stored.
      await b.saveNodeNow({ ...progress("cam-1", 1, true), hubLabels: { site: "n" } });
      const labelled = await storedNode(url);
      expect([labelled.node?.online, labelled.node?.hubLabels]).toEqual([false, { site: "n" }]);

      // The agent comes back at B: B is given the node as stored.
      const claim = await b.claim("cam-1", "hub-b");
      expect([claim.epoch, claim.stored?.progress.ackedSeq]).toEqual([3, 3]);
      expect((await session(url))[0]?.origin).toBe(b.origin);
    } finally {
      await cleanup(url, a, b);
    }
  }, 30_000);

  test("a replica whose beat moved after it was judged keeps its nodes", async () => {
    const { url, a, b } = await aHolds();
    try {
      const beats = await a.beat("hub-a", 1);
      const judged = beats.get(a.origin);
      await a.beat("hub-a", 2);
      expect(await b.releaseDead(new Map([[a.origin, judged]]), 99)).toEqual({
        nodes: [],
        offline: [],
      });
      expect((await storedNode(url)).node?.online).toBe(true);
      expect(await session(url)).toEqual([{ replica: "hub-a", epoch: 1, origin: a.origin }]);
    } finally {
      await cleanup(url, a, b);
    }
  }, 30_000);

  test("a replica that does not lead releases nothing (the leader lock's fence)", async () => {
    const { url, a, b } = await aHolds();
    const sql = await connectPostgres(url, { connectionTimeout: 2 });
    const fenced = new PostgresHubStore({
      sql,
      size: 2,
      leaderFence: async () => {
        throw new NotLeaderError("write the singleton's state");
      },
    });
    try {
      await expect(fenced.releaseDead(new Map([[a.origin, undefined]]), 99)).rejects.toThrow(
        NotLeaderError,
      );
      expect((await storedNode(url)).node?.online).toBe(true);
      expect((await session(url))[0]?.epoch).toBe(1);
    } finally {
      await cleanup(url, a, b, fenced);
    }
  }, 30_000);

  test("the leader's passes: a replica stopped less than the threshold keeps its nodes, one stopped longer loses them", async () => {
    const { url, a, b } = await aHolds();
    const clock = new FakeClock();
    const log = createLogger({ level: "error" });
    const opts = (store: PostgresHubStore, leading: boolean): DeadHolderOptions => ({
      ...{ beats: store, leadership: { leading: () => leading }, replica: "r" },
      ...{ clock, log, intervalMs: 1000, thresholdMs: 5000 },
    });
    const [atA, atB] = [new BeatWatch(), new BeatWatch()];
    const passes = async (n: number, aBeats: boolean) => {
      const released: string[] = [];
      for (let i = 0; i < n; i++) {
        clock.step(1000);
        if (aBeats) await beatAndRelease(opts(a, false), atA);
        released.push(...(await beatAndRelease(opts(b, true), atB)).nodes);
      }
      return released;
    };
    try {
      expect(await passes(2, true)).toEqual([]);
      expect(await passes(4, false)).toEqual([]); // A stopped 4 s
      expect(await passes(3, true)).toEqual([]);
      expect((await storedNode(url)).node?.online).toBe(true);
      expect(await passes(5, false)).toEqual([]); // 5 s: not longer than the threshold
      expect(await passes(1, false)).toEqual(["cam-1"]);
      expect((await storedNode(url)).node?.offlineSince).toBe(clock.now());
      expect(await passes(3, false)).toEqual([]);
    } finally {
      await cleanup(url, a, b);
    }
  }, 30_000);
});
