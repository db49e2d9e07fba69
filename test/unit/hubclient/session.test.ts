import { afterEach, describe, expect, test } from "bun:test";
import type { DesiredReceived } from "../../../src/agent/hubclient/index.ts";
import { type Outbox, type SessionDeps, startSession } from "../../../src/agent/hubclient/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { fakeDial, makeEvent, outboxAt, tempDir } from "./fixtures.ts";

let cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
});

function setup(overrides: Partial<SessionDeps> = {}) {
  const t = tempDir();
  cleanups.push(t.cleanup);
  const clock = new FakeClock();
  const outbox: Outbox = outboxAt(t.dir);
  const { dial, conns } = fakeDial();
  const saved: DesiredReceived[] = [];
  const welcomes: number[] = [];
  const deps: SessionDeps = {
    clock,
    logger: nullLogger,
    dial,
    url: "ws://hub.test/api/v1/agent/connect",
    credential: "flc_secret",
    hello: { nodeName: "cam-1", agentVersion: "0.1.0", streamId: outbox.streamId },
    outbox,
    onWelcome: (w) => welcomes.push(w.ackedSeq),
    onDesired: (d) => {
      saved.push(d);
      return { generation: d.ok ? d.message.generation : 1 };
    },
    ...overrides,
  };
  const session = startSession(deps);
  const conn = conns[0];
  if (conn === undefined) throw new Error("no connection dialed");
  return { clock, outbox, session, conn, saved, welcomes };
}

const types = (sent: Record<string, unknown>[]) => sent.map((m) => m.type);

describe("startSession()", () => {
  test("authenticates with the credential and says hello first", () => {
    const { conn } = setup();
    expect(conn.headers.authorization).toBe("Bearer flc_secret");
    conn.open();
    expect(conn.sent[0]).toEqual({
      type: "hello",
      protocolVersion: 1,
      nodeName: "cam-1",
      agentVersion: "0.1.0",
      streamId: expect.any(String),
      clock: expect.any(Number),
    });
  });

  test("sends nothing from the outbox before welcome, then what follows the hub's ackedSeq", () => {
    const { conn, outbox, welcomes } = setup();
    for (let i = 0; i < 4; i++) outbox.push({ type: "event", event: makeEvent(`e${i}`) });
    conn.open();
    expect(types(conn.sent)).toEqual(["hello"]);
    conn.welcome(2);
    expect(welcomes).toEqual([2]);
    expect(conn.sent.slice(1).map((m) => m.seq)).toEqual([3, 4]);
  });

  test("sends new outbox entries when woken, and forgets acknowledged ones", () => {
    const { conn, outbox, session } = setup();
    conn.open();
    conn.welcome(0);
    outbox.push({ type: "event", event: makeEvent("a") });
    session.wake();
    expect(conn.sent.at(-1)).toMatchObject({ type: "event", seq: 1 });
    conn.receive({ type: "ack", seq: 1 });
    expect(outbox.size).toBe(0);
    expect(outbox.ackedSeq).toBe(1);
  });

  test("stays within the hub's rate limit and sends the rest as tokens refill", () => {
    const { conn, outbox, clock } = setup();
    for (let i = 0; i < 10; i++) outbox.push({ type: "event", event: makeEvent(`e${i}`) });
    conn.open();
    conn.welcome(0, { rateLimit: { messagesPerSecond: 10, burst: 4 } });
    expect(conn.sent.length - 1).toBe(3);
    clock.step(1000);
    expect(conn.sent.length - 1).toBe(10);
  });

  test("refuses a malformed hub message by closing, without throwing", async () => {
    const { conn, session } = setup();
    conn.open();
    conn.receive("{not json");
    const r = await session.done;
    expect(conn.closed?.code).toBe(4400);
    expect(r.welcomed).toBe(false);
    expect(r.reason).toContain("not JSON");
  });

  test("refuses an unknown message type and a welcome with bad fields", async () => {
    const a = setup();
    a.conn.open();
    a.conn.receive({ type: "reboot-device" });
    expect((await a.session.done).reason).toContain("unknown message type");
    const b = setup();
    b.conn.open();
    b.conn.receive({ type: "welcome", ackedSeq: "lots" });
    expect(b.conn.closed?.code).toBe(4400);
  });

  test("ignores an ack for a seq it never sent", () => {
    const { conn, outbox } = setup();
    outbox.push({ type: "event", event: makeEvent("a") });
    conn.open();
    conn.welcome(0);
    conn.receive({ type: "ack", seq: 99 });
    expect(outbox.ackedSeq).toBe(0);
    expect(outbox.size).toBe(1);
  });

  test("answers desired with the desired.ack its handler returns", () => {
    const { conn, saved } = setup();
    conn.open();
    conn.welcome(0);
    conn.receive({ type: "desired", generation: 3, pods: [] });
    expect(saved).toEqual([{ ok: true, message: { type: "desired", generation: 3, pods: [] } }]);
    expect(conn.sent.at(-1)).toEqual({ type: "desired.ack", generation: 3 });
  });

  test("hands an undecodable desired to its handler and keeps the connection", () => {
    const { conn, saved } = setup();
    conn.open();
    conn.welcome(0);
    conn.receive({ type: "desired", generation: 4, pods: "none" });
    expect(saved).toEqual([
      {
        ok: false,
        reason: expect.stringContaining("bad desired message: pods:"),
        generation: 4,
      },
    ]);
    expect(conn.sent.at(-1)).toEqual({ type: "desired.ack", generation: 1 });
    expect(conn.closed).toBeUndefined();
  });

  test("does not acknowledge when its handler fails", () => {
    const { conn } = setup({
      onDesired: () => {
        throw new Error("disk full");
      },
    });
    conn.open();
    conn.welcome(0);
    conn.receive({ type: "desired", generation: 3, pods: [] });
    expect(types(conn.sent)).not.toContain("desired.ack");
  });

  test("sends heartbeats when idle and closes after three silent intervals", async () => {
    const { conn, clock, session } = setup();
    conn.open();
    conn.welcome(0);
    clock.step(10_000);
    expect(conn.sent.at(-1)).toMatchObject({ type: "hb" });
    conn.receive({ type: "hb" });
    clock.step(20_000);
    expect(conn.closed).toBeUndefined();
    clock.step(10_000);
    const r = await session.done;
    expect(r.welcomed).toBe(true);
    expect(conn.closed?.code).toBe(4000);
  });

  test("closes when no welcome comes in time", async () => {
    const { conn, clock, session } = setup();
    conn.open();
    clock.step(10_000);
    expect((await session.done).reason).toContain("no welcome");
  });

  test("reports the hub's error and close reason", async () => {
    const { conn, session } = setup();
    conn.open();
    conn.receive({ type: "error", code: "revoked", reason: "node cam-1 was revoked" });
    conn.events.onClose(4403, "revoked");
    const r = await session.done;
    expect(r.error).toEqual({ type: "error", code: "revoked", reason: "node cam-1 was revoked" });
    expect(r.code).toBe(4403);
  });

  test("skips a message larger than the hub accepts instead of looping on it", () => {
    const { conn, outbox } = setup();
    const big = makeEvent("big");
    big.message = "x".repeat(5000);
    outbox.push({ type: "event", event: big });
    outbox.push({ type: "event", event: makeEvent("small") });
    conn.open();
    conn.welcome(0, { maxMessageBytes: 2000 });
    expect(conn.sent.slice(1).map((m) => m.seq)).toEqual([2]);
  });
});
