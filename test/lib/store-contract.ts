// The contract every implementation of the hub's store (src/hub/store.ts) keeps, as one suite
// run against each: what is written comes back from load() after the store is opened again, in
// the shapes the hub holds in memory. `backing()` makes a new, empty place (a file, a database)
// and gives a function that opens a store on it; each call opens it again, as a restarted hub.
import { describe, expect, test } from "bun:test";
import type { Node } from "../../src/api/node.ts";
import type { HubStore, JoinTokenRecord, NodeProgress } from "../../src/hub/store.ts";
import { makeEvent, makePod } from "../unit/hubclient/fixtures.ts";

export interface StoreBacking {
  open(): Promise<HubStore>;
  /** Removes the backing (after the stores on it were closed). */
  remove(): Promise<void>;
}

const token = (id: string, o: Partial<JoinTokenRecord> = {}): JoinTokenRecord => ({
  ...{ id, hash: `hash-${id}`, expiresAt: 2_000, labels: { site: "a" }, revoked: false },
  ...{ createdAt: 1_000, used: 0, ...o },
});

const progress = (name: string, o: Partial<NodeProgress> = {}): NodeProgress => ({
  ...{ name, credentialHash: `cred-${name}`, hubLabels: { site: "a" }, joinedAt: 5 },
  ...{ ackedSeq: 0, connected: false, desiredGeneration: 0, ackedGeneration: 0, ...o },
});

const nodeObject = (name: string): Node =>
  ({ apiVersion: "v1", kind: "Node", metadata: { name }, status: {} }) as Node;

/** Opens a store on a new backing, runs `fn`, and closes and removes everything after. */
async function using(
  backing: () => Promise<StoreBacking>,
  fn: (open: () => Promise<HubStore>) => Promise<void>,
): Promise<void> {
  const b = await backing();
  const opened: HubStore[] = [];
  const open = async () => {
    const s = await b.open();
    opened.push(s);
    return s;
  };
  try {
    await fn(open);
  } finally {
    for (const s of opened) await s.close().catch(() => {});
    await b.remove();
  }
}

export function storeContract(name: string, backing: () => Promise<StoreBacking>): void {
  const run = (fn: (open: () => Promise<HubStore>) => Promise<void>) => () => using(backing, fn);

  describe(`the hub store contract: ${name}`, () => {
    test(
      "a new store loads empty",
      run(async (open) => {
        const s = await open();
        expect(await s.load()).toEqual({ joinTokens: [], nodes: [], pods: [], events: [] });
        expect(s.pending()).toBe(0);
      }),
    );

    test(
      "the operator hash and join tokens are written at once; a later save replaces a token",
      run(async (open) => {
        const a = await open();
        await a.saveOperatorHash("op-1");
        await a.saveJoinToken(token("t1"));
        await a.saveJoinToken(token("t2", { maxUses: 3 }));
        await a.saveJoinToken(token("t1", { revoked: true, used: 2 }));
        await a.saveOperatorHash("op-2");
        const loaded = await (await open()).load();
        expect(loaded.operatorHash).toBe("op-2");
        const byId = new Map(loaded.joinTokens.map((t) => [t.id, t]));
        expect(byId.get("t1")).toEqual(token("t1", { revoked: true, used: 2 }));
        expect(byId.get("t2")).toEqual(token("t2", { maxUses: 3 }));
      }),
    );

    test(
      "a join writes the token's use and the node together, with what was queued",
      run(async (open) => {
        const a = await open();
        await a.saveJoinToken(token("t1"));
        a.queuePod("cam-0", "u0", makePod("u0"));
        await a.saveJoinNow(token("t1", { used: 1 }), progress("cam-1"), 1_500);
        expect(a.pending()).toBe(0);
        const loaded = await (await open()).load();
        expect(loaded.joinTokens[0]?.used).toBe(1);
        expect(loaded.nodes).toEqual([progress("cam-1")]);
        expect(loaded.pods.map((p) => p.pod.metadata.uid)).toEqual(["u0"]);
      }),
    );

    test(
      "queued reports are written by flush(), coalesced by key, the newest winning",
      run(async (open) => {
        const a = await open();
        await a.saveNodeNow(progress("cam-1"));
        a.queueProgress(progress("cam-1", { ackedSeq: 4, connected: true, streamId: "s1" }));
        a.queueProgress(progress("cam-1", { ackedSeq: 7, connected: true, streamId: "s1" }));
        a.queueNode("cam-1", nodeObject("cam-1"));
        a.queuePod("cam-1", "u1", makePod("u1", "Pending"));
        a.queuePod("cam-1", "u1", makePod("u1"));
        a.queuePod("cam-1", "u2", makePod("u2"));
        a.queueEvent("cam-1", "e1", makeEvent("e1"));
        a.queueEvent("cam-1", "e1", makeEvent("e1", 3));
        expect(a.pending()).toBe(5);
        await a.flush();
        expect(a.pending()).toBe(0);
        await a.flush();
        const loaded = await (await open()).load();
        expect(loaded.nodes).toEqual([
          {
            ...progress("cam-1", { ackedSeq: 7, connected: true, streamId: "s1" }),
            node: nodeObject("cam-1"),
          },
        ]);
        const pods = loaded.pods.map((p) => [p.node, p.pod.metadata.uid, p.pod.status?.phase]);
        expect(pods.sort()).toEqual([
          ["cam-1", "u1", "Running"],
          ["cam-1", "u2", "Running"],
        ]);
        expect(loaded.events).toEqual([{ node: "cam-1", event: makeEvent("e1", 3) }]);
      }),
    );

    test(
      "a deleted pod or event (null) is removed; clearing a node's pods keeps those queued after",
      run(async (open) => {
        const a = await open();
        await a.saveNodeNow(progress("cam-1"));
        await a.saveNodeNow(progress("cam-2"));
        for (const uid of ["u1", "u2"]) a.queuePod("cam-1", uid, makePod(uid));
        a.queuePod("cam-2", "v1", makePod("v1"));
        a.queueEvent("cam-1", "e1", makeEvent("e1"));
        a.queueEvent("cam-1", "e2", makeEvent("e2"));
        await a.flush();
        a.queuePod("cam-1", "u1", null);
        a.queueEvent("cam-1", "e1", null);
        await a.flush();
        let loaded = await (await open()).load();
        expect(loaded.pods.map((p) => p.pod.metadata.uid).sort()).toEqual(["u2", "v1"]);
        expect(loaded.events.map((e) => e.event.metadata.name)).toEqual(["e2"]);
        a.queuePod("cam-1", "u9", makePod("u9"));
        a.queueClearPods("cam-1");
        a.queuePod("cam-1", "u3", makePod("u3"));
        await a.flush();
        loaded = await (await open()).load();
        expect(loaded.pods.map((p) => `${p.node}/${p.pod.metadata.uid}`).sort()).toEqual([
          "cam-1/u3",
          "cam-2/v1",
        ]);
      }),
    );

    test(
      "forgetting a node removes it with its pods and events, stored and queued; others stay",
      run(async (open) => {
        const a = await open();
        for (const n of ["cam-1", "cam-2"]) {
          await a.saveNodeNow(progress(n));
          a.queuePod(n, `p-${n}`, makePod(`p-${n}`));
          a.queueEvent(n, `e-${n}`, makeEvent(`e-${n}`));
        }
        await a.flush();
        a.queuePod("cam-1", "late", makePod("late"));
        a.queueProgress(progress("cam-1", { ackedSeq: 9 }));
        await a.forgetNodeNow("cam-1");
        expect(a.pending()).toBe(0);
        const loaded = await (await open()).load();
        expect(loaded.nodes.map((n) => n.name)).toEqual(["cam-2"]);
        expect(loaded.pods.map((p) => p.node)).toEqual(["cam-2"]);
        expect(loaded.events.map((e) => e.node)).toEqual(["cam-2"]);
      }),
    );

    test(
      "objects come back as written, whatever characters their strings hold",
      run(async (open) => {
        const a = await open();
        await a.saveNodeNow(progress("cam-1", { hubLabels: { note: "caf\u00e9 \u{1f4f7}" } }));
        const pod = makePod("u1");
        pod.metadata.annotations = { raw: 'nul\u0000 tab\t quote" back\\ \u{1f4f7}' };
        a.queuePod("cam-1", "u1", pod);
        const event = { ...makeEvent("e1"), message: "line 1\nline 2 \u0000 \u2028" };
        a.queueEvent("cam-1", "e1", event);
        await a.flush();
        const loaded = await (await open()).load();
        expect(loaded.nodes[0]?.hubLabels).toEqual({ note: "caf\u00e9 \u{1f4f7}" });
        expect(loaded.pods).toEqual([{ node: "cam-1", pod }]);
        expect(loaded.events).toEqual([{ node: "cam-1", event }]);
      }),
    );

    test(
      "close() writes what is queued",
      run(async (open) => {
        const a = await open();
        await a.saveNodeNow(progress("cam-1"));
        a.queueProgress(progress("cam-1", { ackedSeq: 3 }));
        a.queueEvent("cam-1", "e1", makeEvent("e1"));
        expect(await a.close()).toEqual({ unstored: 0 });
        const loaded = await (await open()).load();
        expect(loaded.nodes[0]?.ackedSeq).toBe(3);
        expect(loaded.events.length).toBe(1);
      }),
    );
  });
}
