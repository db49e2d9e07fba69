// Who holds a node among hub replicas, at the store (src/hub/pg/node-sessions.ts, the fence in
// store-postgres.ts's flush): two PostgresHubStore instances on one database stand for two
// replicas. A claim moves the node's epoch on and reads the node as stored when the claimer may
// hold a stale view; a flush of the replica that lost the node does not overwrite what the new
// holder stored, and its operator changes of the node's progress still land. Needs root and
// Debian's postgresql (a throwaway cluster, scripts/lib/postgres.ts).
import { describe, expect, test } from "bun:test";
import { SQL } from "bun";
import type { Pod } from "../../src/api/types.ts";
import type { PostgresHubStore } from "../../src/hub/store-postgres.ts";
import { openHubStore, postgresForFile } from "../lib/postgres.ts";
import { makeEvent, makePod } from "../unit/hubclient/fixtures.ts";

const cluster = postgresForFile();

const open = openHubStore;

const progress = (name: string, ackedSeq = 0, streamId = "s1") => ({
  ...{ name, credentialHash: `cred-${name}`, hubLabels: {}, joinedAt: 5, ackedSeq, streamId },
  ...{ connected: true, desiredGeneration: 0, ackedGeneration: 0 },
});

const podWith = (uid: string, image: string): Pod => {
  const p = makePod(uid);
  return { ...p, spec: { containers: [{ name: "web", image }] } };
};

/** Two stores on a new database, with node cam-1 stored. */
async function twoReplicas(): Promise<{ url: string; a: PostgresHubStore; b: PostgresHubStore }> {
  const url = await cluster().createDatabase();
  const [a, b] = await Promise.all([open(url), open(url)]);
  await a.saveNodeNow(progress("cam-1"));
  return { url, a, b };
}

async function stored(url: string) {
  const s = await open(url);
  try {
    return await s.load();
  } finally {
    await s.close();
  }
}

async function sessionRow(url: string): Promise<{ replica: string; epoch: number }> {
  const sql = new SQL(url, { max: 1 });
  try {
    const [row] = await sql.unsafe(
      "SELECT replica, epoch::int AS epoch FROM node_sessions WHERE node = 'cam-1'",
    );
    return row;
  } finally {
    await sql.close();
  }
}

describe("node_sessions: who holds a node, and the fence of a flush", () => {
  test("a replica that lost a node cannot overwrite what the new holder stored", async () => {
    const { url, a, b } = await twoReplicas();
    const lostAtA: string[] = [];
    a.onLost((n) => lostAtA.push(n));
    try {
      expect((await a.claim("cam-1", "hub-a")).epoch).toBe(1);
      a.queueProgress(progress("cam-1", 3));
      a.queuePod("cam-1", "u1", podWith("u1", "v1"));
      await a.flush();

      // B takes the node: it never held it, so it is given the node as A stored it.
      const taken = await b.claim("cam-1", "hub-b");
      expect(taken.epoch).toBe(2);
      expect(taken.stored?.progress.ackedSeq).toBe(3);
      expect(taken.stored?.pods.map((p) => p.spec.containers[0]?.image)).toEqual(["v1"]);
      expect(await sessionRow(url)).toEqual({ replica: "hub-b", epoch: 2 });
      b.queueProgress(progress("cam-1", 5));
      b.queuePod("cam-1", "u1", podWith("u1", "v2"));
      await b.flush();

      // A still believes it holds the node: its late reports are dropped, whole.
      a.queueProgress(progress("cam-1", 4));
      a.queuePod("cam-1", "u1", podWith("u1", "stale"));
      a.queuePod("cam-1", "u2", podWith("u2", "stale"));
      a.queueEvent("cam-1", "e1", makeEvent("e1"));
      a.queueNode("cam-1", {
        apiVersion: "v1",
        kind: "Node",
        metadata: { name: "cam-1" },
        spec: {},
        status: {},
      });
      await a.flush();
      expect(a.pending()).toBe(0);
      expect(lostAtA).toEqual(["cam-1"]);

      const after = await stored(url);
      expect(after.nodes.map((n) => [n.name, n.ackedSeq, n.node])).toEqual([
        ["cam-1", 5, undefined],
      ]);
      expect(after.pods.map((p) => [p.pod.metadata.uid, p.pod.spec.containers[0]?.image])).toEqual([
        ["u1", "v2"],
      ]);
      expect(after.events).toEqual([]);
    } finally {
      await a.close();
      await b.close();
      await cluster().dropDatabase(url);
    }
  }, 30_000);

  test("a non-holder's change of a node's progress keeps the holder's session fields", async () => {
    const { url, a, b } = await twoReplicas();
    try {
      await b.claim("cam-1", "hub-b");
      b.queueProgress(progress("cam-1", 7, "stream-b"));
      await b.flush();
      // A (not the holder) changes the node's labels and revokes it, with its stale seqs.
      await a.saveNodeNow({
        ...progress("cam-1", 2, "stream-old"),
        hubLabels: { site: "north" },
        revokedAt: 99,
      });
      const [node] = (await stored(url)).nodes;
      expect(node?.hubLabels).toEqual({ site: "north" });
      expect(node?.revokedAt).toBe(99);
      expect(node?.ackedSeq).toBe(7);
      expect(node?.streamId).toBe("stream-b");
    } finally {
      await a.close();
      await b.close();
      await cluster().dropDatabase(url);
    }
  }, 30_000);

  test("the holder's write from a view older than another replica's revoke and labels keeps them; its own later labels win", async () => {
    const { url, a, b } = await twoReplicas();
    try {
      await b.claim("cam-1", "hub-b");
      b.queueProgress({ ...progress("cam-1", 3), hubLabels: { site: "old" }, hubLabelsAt: 10 });
      await b.flush();
      // A, which does not hold the node, revokes it and sets its labels; B has not followed
      // that row yet and writes the node from what it holds.
      await a.saveNodeNow({
        ...progress("cam-1", 3),
        ...{ hubLabels: { site: "north" }, hubLabelsAt: 20, revokedAt: 99 },
      });
      b.queueProgress({ ...progress("cam-1", 8), hubLabels: { site: "old" }, hubLabelsAt: 10 });
      await b.flush();
      const [node] = (await stored(url)).nodes;
      expect(node).toMatchObject({ ackedSeq: 8, revokedAt: 99, hubLabels: { site: "north" } });
      // B's operator sets labels after it saw A's (a later stamp): they are stored.
      await b.saveNodeNow({
        ...progress("cam-1", 9),
        ...{ hubLabels: { site: "south" }, hubLabelsAt: 21, revokedAt: 99 },
      });
      expect((await stored(url)).nodes[0]?.hubLabels).toEqual({ site: "south" });
      // A, which does not hold it, sets labels from a view that never had the revoke: the
      // revoke stays.
      await a.saveNodeNow({
        ...progress("cam-1", 3),
        hubLabels: { site: "east" },
        hubLabelsAt: 30,
      });
      expect((await stored(url)).nodes[0]).toMatchObject({
        revokedAt: 99,
        hubLabels: { site: "east" },
      });
    } finally {
      await a.close();
      await b.close();
      await cluster().dropDatabase(url);
    }
  }, 30_000);

  test("a join at a non-holder (the node's credential expired) stores its new credential, with the holder's session fields", async () => {
    const { url, a, b } = await twoReplicas();
    const sql = new SQL(url, { max: 1 });
    try {
      await b.claim("cam-1", "hub-b");
      b.queueProgress({ ...progress("cam-1", 7, "stream-b"), credentialExpiresAt: 10 });
      await b.flush();
      const token = {
        ...{ id: "t1", hash: "tok-hash", expiresAt: Date.now() + 60_000, labels: {} },
        ...{ revoked: false, createdAt: 1, used: 0 },
      };
      await a.saveJoinToken(token);
      const joined = {
        ...progress("cam-1", 0, "stream-old"),
        ...{ credentialHash: "cred-new", credentialIssuedAt: 20, credentialExpiresAt: 30 },
      };
      await a.saveJoinNow(token, joined, 20);
      const [node] = (await stored(url)).nodes;
      expect(node).toMatchObject({
        ...{ credentialHash: "cred-new", credentialIssuedAt: 20, credentialExpiresAt: 30 },
        ...{ ackedSeq: 7, streamId: "stream-b" },
      });
      // Other replicas follow the change log: its last row of the node has the new credential.
      const [row] = (await sql.unsafe(
        "SELECT object FROM changes WHERE kind = 'nodes' AND key = 'cam-1' ORDER BY rv DESC LIMIT 1",
      )) as { object: string }[];
      expect(JSON.parse(row?.object ?? "{}").progress.credentialHash).toBe("cred-new");
    } finally {
      await sql.close();
      await a.close();
      await b.close();
      await cluster().dropDatabase(url);
    }
  }, 30_000);

  test("a non-holder's change waits for the holder's write in flight and keeps its newer seq", async () => {
    const { url, a, b } = await twoReplicas();
    const holderTx = new SQL(url, { max: 1 });
    try {
      await b.claim("cam-1", "hub-b");
      b.queueProgress(progress("cam-1", 9));
      await b.flush();
      let labelled: Promise<void> | undefined;
      // The holder's flush, in flight: it has written seq 10 and not committed yet.
      await holderTx.begin(async (tx) => {
        await tx.unsafe("UPDATE nodes SET progress = $1::text::json WHERE name = 'cam-1'", [
          JSON.stringify(progress("cam-1", 10)),
        ]);
        labelled = a.saveNodeNow({ ...progress("cam-1", 2), hubLabels: { site: "north" } });
        await Bun.sleep(500);
      });
      await labelled;
      const [node] = (await stored(url)).nodes;
      expect(node?.hubLabels).toEqual({ site: "north" });
      expect(node?.ackedSeq).toBe(10);
    } finally {
      await holderTx.close();
      await a.close();
      await b.close();
      await cluster().dropDatabase(url);
    }
  }, 30_000);

  test("a node forgotten while another replica held it is stored again when it joins anew", async () => {
    const { url, a, b } = await twoReplicas();
    try {
      await b.claim("cam-1", "hub-b");
      await a.forgetNodeNow("cam-1");
      expect(await sessionRow(url)).toBeUndefined();
      await a.saveNodeNow(progress("cam-1", 0, "fresh"));
      expect((await stored(url)).nodes.map((n) => [n.name, n.streamId])).toEqual([
        ["cam-1", "fresh"],
      ]);
    } finally {
      await a.close();
      await b.close();
      await cluster().dropDatabase(url);
    }
  }, 30_000);

  test("a claim right after its own is continuous; one after another replica's reads the store and drops what was queued", async () => {
    const { url, a, b } = await twoReplicas();
    try {
      expect((await a.claim("cam-1", "hub-a")).stored?.progress.name).toBe("cam-1");
      // Taken again by the same replica with nobody in between: its memory is current.
      const again = await a.claim("cam-1", "hub-a");
      expect(again).toEqual({ epoch: 2 });
      await b.claim("cam-1", "hub-b");
      // A hears of it late; what it queued of the node meanwhile is stale.
      expect(a.release("cam-1", 2)).toBe(false);
      a.queuePod("cam-1", "u1", podWith("u1", "stale"));
      const back = await a.claim("cam-1", "hub-a");
      expect(back.epoch).toBe(4);
      expect(back.stored?.pods).toEqual([]);
      expect(a.pending()).toBe(0);
      // B hears of A's claim and lets the node go; A's own message changes nothing at A.
      expect(b.release("cam-1", 4)).toBe(true);
      expect(b.release("cam-1", 4)).toBe(false);
      expect(a.release("cam-1", 4)).toBe(false);
      a.queuePod("cam-1", "u1", podWith("u1", "v4"));
      await a.flush();
      expect((await stored(url)).pods.map((p) => p.pod.spec.containers[0]?.image)).toEqual(["v4"]);
    } finally {
      await a.close();
      await b.close();
      await cluster().dropDatabase(url);
    }
  }, 30_000);

  test("a replica's own flush in flight when it takes the node again (its agent reconnected) is written, not fenced", async () => {
    const { url, a, b } = await twoReplicas();
    const lost: string[] = [];
    a.onLost((n) => lost.push(n));
    try {
      await a.claim("cam-1", "hub-a");
      for (let i = 1; i <= 20; i++) {
        a.queueProgress(progress("cam-1", i));
        a.queuePod("cam-1", `u${i}`, podWith(`u${i}`, "v1"));
        // Either one asked for first: a claim waits for the flush, a flush for the claim.
        const [claim] =
          i % 2 === 0
            ? await Promise.all([a.claim("cam-1", "hub-a"), a.flush()])
            : (await Promise.all([a.flush(), a.claim("cam-1", "hub-a")])).reverse();
        expect(claim).toEqual({ epoch: i + 1 });
      }
      const now = await stored(url);
      expect(now.nodes[0]?.ackedSeq).toBe(20);
      expect(now.pods).toHaveLength(20);
      expect(lost).toEqual([]);
    } finally {
      await a.close();
      await b.close();
      await cluster().dropDatabase(url);
    }
  }, 60_000);

  test("a claim waits for a flush of the old holder in flight, and then reads what it wrote", async () => {
    const { url, a, b } = await twoReplicas();
    try {
      await a.claim("cam-1", "hub-a");
      for (let i = 1; i <= 20; i++) {
        // A flush of A and a claim of the other replica at the same moment, many times: either
        // the flush lands first and the claimer reads it, or the claim does and the flush is
        // dropped; never a flush that lands after the claim read the node.
        const [holder, taker] = i % 2 === 1 ? [a, b] : [b, a];
        holder.queueProgress(progress("cam-1", i * 10));
        const [, claim] = await Promise.all([holder.flush(), taker.claim("cam-1", `hub-${i}`)]);
        const now = await stored(url);
        expect(claim.stored?.progress.ackedSeq).toBe(now.nodes[0]?.ackedSeq);
        holder.release("cam-1", claim.epoch);
      }
    } finally {
      await a.close();
      await b.close();
      await cluster().dropDatabase(url);
    }
  }, 60_000);
});
