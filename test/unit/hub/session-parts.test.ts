// The named parts of agents' sessions on the hub, each alone: the connection (AgentSessions),
// message routing (routeAgentMessage) and the acknowledging flusher.
import { describe, expect, test } from "bun:test";
import { routeAgentMessage } from "../../../src/hub/agent-router.ts";
import { Flusher } from "../../../src/hub/flusher.ts";
import { Identity } from "../../../src/hub/identity.ts";
import { AgentSessions, type AgentSocket } from "../../../src/hub/sessions.ts";
import { SqliteHubStore } from "../../../src/hub/store-sqlite.ts";
import { PROTOCOL_VERSION } from "../../../src/protocol/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { testFleet } from "../../lib/hub-fleet.ts";
import { settle } from "../../lib/hub-updates.ts";
import { makeEvent } from "../hubclient/fixtures.ts";

async function hubParts() {
  const clock = new FakeClock();
  const store = new SqliteHubStore(":memory:");
  const loaded = await store.load();
  const fleet = testFleet(store, loaded, clock);
  const identity = new Identity({ store, nodes: fleet.nodes }, loaded);
  const tok = await identity.createJoinToken(60_000, {}, clock.now());
  const { credential } = await identity.join(
    { joinToken: tok.token, nodeName: "cam-1" },
    clock.now(),
  );
  const dirty: string[] = [];
  const sessions = new AgentSessions({
    fleet,
    identity,
    clock,
    log: nullLogger,
    heartbeatIntervalMs: 10_000,
    maxMessageBytes: 1 << 20,
    rateLimit: { messagesPerSecond: 10, burst: 3 },
    helloTimeoutMs: 5000,
    markDirty: (n) => dirty.push(n),
    flushNow: () => {},
  });
  return { clock, store, fleet, identity, credential, sessions, dirty };
}

function socket(sessions: AgentSessions, credential: string | undefined) {
  const sent: Record<string, unknown>[] = [];
  const ws: AgentSocket & { closedWith?: number } = {
    data: sessions.newData(credential, true),
    send: (t) => sent.push(JSON.parse(String(t))),
    close(code) {
      this.closedWith = code;
    },
  };
  return { ws, sent };
}

const hello = {
  type: "hello",
  protocolVersion: PROTOCOL_VERSION,
  nodeName: "cam-1",
  agentVersion: "0.1.0",
  streamId: "s1",
};

describe("AgentSessions (the connection part)", () => {
  test("refuses an unknown credential on open with unauthorized", async () => {
    const { sessions } = await hubParts();
    const { ws, sent } = socket(sessions, "flc_nope");
    sessions.open(ws);
    expect(sent).toEqual([
      { type: "error", code: "unauthorized", reason: "unknown node credential" },
    ]);
    expect(ws.closedWith).toBe(4401);
  });

  test("welcomes a hello, then closes an older connection of the same node as replaced", async () => {
    const { sessions, credential } = await hubParts();
    const a = socket(sessions, credential);
    sessions.open(a.ws);
    sessions.message(a.ws, JSON.stringify(hello));
    expect(a.sent[0]).toMatchObject({ type: "welcome", ackedSeq: 0 });
    const b = socket(sessions, credential);
    sessions.open(b.ws);
    sessions.message(b.ws, JSON.stringify(hello));
    expect(a.ws.closedWith).toBe(4409);
    expect(sessions.count()).toBe(1);
  });

  test("closes a connection that says nothing within the hello timeout", async () => {
    const { sessions, credential, clock } = await hubParts();
    const { ws, sent } = socket(sessions, credential);
    sessions.open(ws);
    clock.step(5000);
    expect(sent.at(-1)).toMatchObject({ type: "error", code: "protocol" });
  });

  test("closes a connection over the rate limit with rate-limited", async () => {
    const { sessions, credential } = await hubParts();
    const { ws } = socket(sessions, credential);
    sessions.open(ws);
    sessions.message(ws, JSON.stringify(hello));
    for (let i = 0; i < 4; i++) sessions.message(ws, '{"type":"hb"}');
    expect(ws.closedWith).toBe(4429);
  });
});

describe("routeAgentMessage() (the routing part)", () => {
  test("answers a heartbeat, queues a sequenced message, refuses a second hello", async () => {
    const { fleet, clock, sessions, credential } = await hubParts();
    const { ws } = socket(sessions, credential);
    sessions.open(ws);
    sessions.message(ws, JSON.stringify(hello));
    const replies: string[] = [];
    const dirty: string[] = [];
    const deps = { fleet, markDirty: (n: string) => dirty.push(n) };
    const now = clock.now();
    routeAgentMessage("cam-1", { type: "hb" }, now, (t) => replies.push(t), deps);
    const ev = { type: "event" as const, seq: 1, event: makeEvent("e1") };
    routeAgentMessage("cam-1", ev, now, (t) => replies.push(t), deps);
    const again = routeAgentMessage("cam-1", hello as never, now, () => {}, deps);
    expect(replies).toEqual(['{"type":"hb"}']);
    expect(dirty).toEqual(["cam-1"]);
    expect(fleet.receivedSeq("cam-1")).toBe(1);
    expect(again).toEqual({ code: "protocol", reason: "hello was already received" });
  });

  test("keeps a health report in the node's history, unacknowledged, and a malformed one closes", async () => {
    const { fleet, clock, sessions, credential } = await hubParts();
    const { ws } = socket(sessions, credential);
    sessions.open(ws);
    sessions.message(ws, JSON.stringify(hello));
    const health = { collectedAt: 5, temperatures: [], filesystems: [], interfaces: [] };
    sessions.message(ws, JSON.stringify({ type: "health", health }));
    expect(fleet.health.view("cam-1").history).toEqual([health]);
    expect(fleet.receivedSeq("cam-1")).toBe(0);
    clock.step(1);
    sessions.message(ws, JSON.stringify({ type: "health", health: { ...health, load: [1] } }));
    expect(ws.closedWith).toBe(4400);
    expect(fleet.health.view("cam-1").history).toEqual([health]);
  });

  test("refuses an event of another node with forbidden", async () => {
    const { fleet, clock } = await hubParts();
    const event = { ...makeEvent("e1"), source: { component: "fleetlet", host: "other" } };
    const r = routeAgentMessage("cam-1", { type: "event", seq: 1, event }, clock.now(), () => {}, {
      fleet,
      markDirty: () => {},
    });
    expect(r?.code).toBe("forbidden");
  });
});

describe("Flusher (the acknowledging part)", () => {
  test("acknowledges each dirty node once its messages are stored, after the interval", async () => {
    const { fleet, store, clock, sessions, credential } = await hubParts();
    const { ws } = socket(sessions, credential);
    sessions.open(ws);
    sessions.message(ws, JSON.stringify(hello));
    const acks: [string, number][] = [];
    const flusher = new Flusher({
      fleet,
      store,
      clock,
      log: nullLogger,
      intervalMs: 20,
      ack: (n, s) => acks.push([n, s]),
    });
    fleet.ingest("cam-1", { type: "event", seq: 3, event: makeEvent("e") });
    flusher.markDirty("cam-1");
    expect(acks).toEqual([]);
    clock.step(20);
    await settle();
    expect(acks).toEqual([["cam-1", 3]]);
    expect(fleet.nodes.get("cam-1")?.ackedSeq).toBe(3);
  });

  test("sends no ack when the store write fails", async () => {
    const { fleet, clock } = await hubParts();
    const acks: unknown[] = [];
    const flusher = new Flusher({
      fleet,
      store: {
        flush() {
          throw new Error("disk full");
        },
        pending: () => 1,
      },
      clock,
      log: nullLogger,
      intervalMs: 20,
      ack: (n, s) => acks.push([n, s]),
    });
    flusher.markDirty("cam-1");
    await flusher.flush();
    expect(acks).toEqual([]);
    expect(flusher.health().failedFlushes).toBe(1);
  });
});
