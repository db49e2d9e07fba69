// A hub replica's agent sessions with node taking (sessions.ts's take, holding.ts): the welcome
// waits for the node to be taken in the store and resumes from what the store holds; a store
// that cannot take it refuses the connection; a node another replica took is let go without
// being marked offline. The store's side (epochs, fencing) is in test/e2e/hub-node-sessions.
import { describe, expect, test } from "bun:test";
import { createLocalBus } from "../../../src/hub/bus.ts";
import type { Change } from "../../../src/hub/fleet.ts";
import { holdNodes } from "../../../src/hub/holding.ts";
import { Identity } from "../../../src/hub/identity.ts";
import type { NodeClaim, NodeSessions, StoredNode } from "../../../src/hub/node-sessions.ts";
import { AgentSessions, type AgentSocket } from "../../../src/hub/sessions.ts";
import { SqliteHubStore } from "../../../src/hub/store-sqlite.ts";
import { PROTOCOL_VERSION } from "../../../src/protocol/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { testFleet } from "../../lib/hub-fleet.ts";
import { settle } from "../../lib/hub-updates.ts";
import { makeEvent, makePod } from "../hubclient/fixtures.ts";

async function replicaParts(take: (node: string) => Promise<StoredNode | undefined>) {
  const clock = new FakeClock();
  const store = new SqliteHubStore(":memory:");
  const loaded = await store.load();
  const changes: Change[] = [];
  const fleet = testFleet(store, loaded, clock, (c) => changes.push(c));
  const identity = new Identity({ store, nodes: fleet.nodes }, loaded);
  const tok = await identity.createJoinToken(60_000, {}, clock.now());
  const { credential } = await identity.join(
    { joinToken: tok.token, nodeName: "cam-1" },
    clock.now(),
  );
  const sessions = new AgentSessions({
    ...{ fleet, identity, clock, log: nullLogger, heartbeatIntervalMs: 10_000 },
    ...{ maxMessageBytes: 1 << 20, rateLimit: { messagesPerSecond: 10, burst: 10 } },
    ...{ helloTimeoutMs: 5000, markDirty: () => {}, flushNow: () => {}, take },
  });
  const sent: Record<string, unknown>[] = [];
  const ws: AgentSocket & { closedWith?: number } = {
    data: sessions.newData(credential, true),
    send: (t) => sent.push(JSON.parse(String(t))),
    close(code) {
      this.closedWith = code;
    },
  };
  sessions.open(ws);
  return { clock, fleet, sessions, ws, sent, changes };
}

const hello = JSON.stringify({
  type: "hello",
  protocolVersion: PROTOCOL_VERSION,
  nodeName: "cam-1",
  agentVersion: "0.1.0",
  streamId: "s1",
});

/** The node as another replica stored it: stream s1 acknowledged up to 7, one pod, one event. */
const storedByAnother = (): StoredNode => ({
  progress: {
    ...{ name: "cam-1", credentialHash: "h", hubLabels: {}, joinedAt: 0, streamId: "s1" },
    ...{ ackedSeq: 7, connected: true, desiredGeneration: 0, ackedGeneration: 0 },
  },
  pods: [makePod("u1")],
  events: [makeEvent("e1")],
});

describe("agent sessions of a hub replica (taking the node before the welcome)", () => {
  test("welcomes once the node is taken, resuming from the seq and pods the store holds", async () => {
    const taken: string[] = [];
    const p = await replicaParts(async (node) => {
      taken.push(node);
      return storedByAnother();
    });
    p.sessions.message(p.ws, hello);
    expect(p.sent).toEqual([]);
    await settle();
    expect(taken).toEqual(["cam-1"]);
    expect(p.sent[0]).toMatchObject({ type: "welcome", ackedSeq: 7 });
    expect(p.fleet.receivedSeq("cam-1")).toBe(7);
    expect([...p.fleet.podsOf("cam-1").keys()]).toEqual(["u1"]);
    expect([...p.fleet.eventsOf("cam-1").keys()]).toEqual(["e1"]);
    expect(p.changes.filter((c) => c.kind === "pods").map((c) => c.type)).toEqual(["ADDED"]);
    expect(p.fleet.isOnline("cam-1")).toBe(true);
  });

  test("a message between hello and welcome closes the connection", async () => {
    const p = await replicaParts(() => new Promise(() => {}));
    p.sessions.message(p.ws, hello);
    p.sessions.message(p.ws, '{"type":"hb"}');
    expect(p.sent).toEqual([
      { type: "error", code: "protocol", reason: "a message after hello and before welcome" },
    ]);
    expect(p.ws.closedWith).toBe(4400);
  });

  test("a take that does not end within the hello timeout refuses the connection", async () => {
    const p = await replicaParts(() => new Promise(() => {}));
    p.sessions.message(p.ws, hello);
    p.clock.step(5000);
    expect(p.sent).toEqual([
      {
        type: "error",
        code: "shutting-down",
        reason: "this hub replica could not take the node within 5000 ms; try another",
      },
    ]);
    expect(p.ws.closedWith).toBe(1001);
  });

  test("a store that cannot take the node refuses the connection; nothing is welcomed", async () => {
    const p = await replicaParts(() => Promise.reject(new Error("connection refused")));
    p.sessions.message(p.ws, hello);
    await settle();
    expect(p.sent).toHaveLength(1);
    expect(p.sent[0]).toMatchObject({ type: "error", code: "shutting-down" });
    expect(String(p.sent[0]?.reason)).toContain("connection refused");
    expect(p.ws.closedWith).toBe(1001);
    expect(p.sessions.count()).toBe(0);
    expect(p.fleet.isOnline("cam-1")).toBe(false);
  });

  test("a node taken by another replica: its connection closes as replaced, and it does not go offline here", async () => {
    const p = await replicaParts(async () => undefined);
    p.sessions.message(p.ws, hello);
    await settle();
    p.sessions.lost("cam-1");
    expect(p.ws.closedWith).toBe(4409);
    expect(p.sessions.count()).toBe(0);
    p.sessions.close(p.ws);
    p.clock.step(60_000);
    expect(p.fleet.checkLiveness(p.clock.now())).toEqual([]);
    expect(p.fleet.isOnline("cam-1")).toBe(true);
    // Welcomed here again: it is this replica's again, liveness included.
    const again = await replicaParts(async () => undefined);
    again.sessions.message(again.ws, hello);
    await settle();
    again.clock.step(60_000);
    expect(again.fleet.checkLiveness(again.clock.now())).toEqual(["cam-1"]);
  });
});

describe("holdNodes() (the bus's taken messages)", () => {
  test("publishes taken with the epoch; a newer epoch from another replica closes the connection", async () => {
    const bus = createLocalBus();
    const heard: unknown[] = [];
    bus.subscribe("taken", (m) => heard.push(m));
    let epoch = 0;
    let held: number | undefined;
    const ns: NodeSessions = {
      claim: async (): Promise<NodeClaim> => {
        held = ++epoch;
        return { epoch };
      },
      release: (_name, e) => {
        if (held === undefined || held >= e) return false;
        held = undefined;
        return true;
      },
      onLost: () => {},
    };
    const lost: string[] = [];
    const take = holdNodes(ns, {
      bus,
      replica: "hub-a",
      sessions: () => ({ lost: (n) => lost.push(n) }),
      log: nullLogger,
    });
    expect(await take("cam-1")).toBeUndefined();
    expect(heard).toEqual([{ type: "taken", node: "cam-1", replica: "hub-a", epoch: 1 }]);
    expect(lost).toEqual([]);
    bus.publish({ type: "taken", node: "cam-1", replica: "hub-b", epoch: 2 });
    expect(lost).toEqual(["cam-1"]);
  });
});
