import { afterEach, describe, expect, test } from "bun:test";
import { type Outbox, type SessionDeps, startSession } from "../../../src/agent/hubclient/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { fakeDial, makeEvent, outboxAt, tempDir } from "./fixtures.ts";

const DAY = 86_400_000;
let cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
});

function setup(start = Date.UTC(2026, 0, 1)) {
  const t = tempDir();
  cleanups.push(t.cleanup);
  const clock = new FakeClock(start);
  const outbox: Outbox = outboxAt(t.dir);
  const { dial, conns } = fakeDial();
  const deps: SessionDeps = {
    clock,
    logger: nullLogger,
    dial,
    url: "ws://hub.test/api/v1/agent/connect",
    credential: "flc_secret",
    hello: { nodeName: "cam-1", agentVersion: "0.1.0", streamId: outbox.streamId },
    outbox,
    onWelcome: () => {},
    onDesired: (d) => ({ generation: d.ok ? d.message.generation : 1 }),
  };
  const session = startSession(deps);
  const conn = conns[0];
  if (conn === undefined) throw new Error("no connection dialed");
  return { clock, outbox, session, conn };
}

describe("the hub session and the agent's clock (docs/protocol.md, Clock skew)", () => {
  test("hello carries the wall clock, even at the epoch", () => {
    const { conn } = setup(1_234);
    conn.open();
    expect(conn.sent[0]).toMatchObject({ type: "hello", clock: 1_234 });
  });

  test("each hb carries the wall clock and the round trip of the last answered hello or hb", () => {
    const { conn, clock } = setup();
    conn.open();
    clock.step(40);
    conn.welcome(0);
    clock.step(10_000);
    expect(conn.sent.at(-1)).toEqual({ type: "hb", clock: clock.now(), rttMs: 40 });
    clock.step(7);
    conn.receive({ type: "hb" });
    clock.stepWall(-3 * 3_600_000);
    clock.step(10_000 - 7);
    expect(conn.sent.at(-1)).toEqual({ type: "hb", clock: clock.now(), rttMs: 7 });
  });

  test.each([
    ["back", -DAY],
    ["forward", DAY],
  ])(
    "a wall step %s of a day neither closes a live connection nor keeps a dead one open",
    async (_dir, step) => {
      const { conn, clock, session } = setup();
      conn.open();
      conn.welcome(0);
      clock.step(10_000);
      conn.receive({ type: "hb" });
      clock.stepWall(step);
      clock.step(10_000);
      conn.receive({ type: "hb" });
      clock.step(10_000);
      expect(conn.closed).toBeUndefined();
      clock.stepWall(-step);
      clock.step(30_000);
      expect((await session.done).reason).toContain("three heartbeat intervals");
    },
  );

  test("a wall step back keeps the outbox flowing at the hub's rate", () => {
    const { conn, clock, outbox, session } = setup();
    conn.open();
    conn.receive({
      type: "welcome",
      protocolVersion: 1,
      heartbeatIntervalMs: 10_000,
      ackedSeq: 0,
      maxMessageBytes: 1024 * 1024,
      rateLimit: { messagesPerSecond: 10, burst: 2 },
    });
    clock.stepWall(-DAY);
    for (let i = 0; i < 5; i++) outbox.push({ type: "event", event: makeEvent(`e${i}`) });
    session.wake();
    clock.step(1_000);
    expect(conn.sent.filter((m) => m.type === "event").length).toBe(5);
  });
});
