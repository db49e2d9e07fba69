// The named parts of a hub session, each alone: the connection, message routing, the outbox pump.
import { afterEach, describe, expect, test } from "bun:test";
import { Connection } from "../../../src/agent/hubclient/connection.ts";
import { OutboxPump } from "../../../src/agent/hubclient/pump.ts";
import { type HubMessageHandlers, routeHubFrame } from "../../../src/agent/hubclient/router.ts";
import type { Welcome } from "../../../src/protocol/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { fakeDial, makeEvent, outboxAt, tempDir } from "./fixtures.ts";

let cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
});

function connection(clock = new FakeClock()) {
  const { dial, conns } = fakeDial();
  const frames: unknown[] = [];
  let opened = 0;
  let ended = 0;
  const conn = new Connection({
    clock,
    logger: nullLogger,
    dial,
    url: "ws://hub.test/c",
    credential: "flc_x",
    onOpen: () => opened++,
    onFrame: (d) => frames.push(d),
    onEnd: () => ended++,
  });
  const fake = conns[0];
  if (fake === undefined) throw new Error("not dialed");
  return { conn, fake, frames, clock, counts: () => ({ opened, ended }) };
}

const welcome = (extra: Partial<Welcome> = {}): Welcome => ({
  type: "welcome",
  protocolVersion: 1,
  heartbeatIntervalMs: 10_000,
  ackedSeq: 0,
  maxMessageBytes: 1 << 20,
  rateLimit: { messagesPerSecond: 100, burst: 1000 },
  ...extra,
});

describe("Connection", () => {
  test("dials with the credential, passes frames on and records when it heard the hub", () => {
    const { conn, fake, frames, clock, counts } = connection();
    expect(fake.headers.authorization).toBe("Bearer flc_x");
    fake.open();
    clock.step(500);
    fake.receive({ type: "hb" });
    expect(counts().opened).toBe(1);
    expect(frames).toEqual(['{"type":"hb"}']);
    expect(conn.lastHeard).toBe(clock.monotonic());
  });

  test("ends once, cancels its timers and reports how it ended", async () => {
    const { conn, fake, clock, counts } = connection();
    let fired = 0;
    conn.setTimer(1000, () => fired++);
    fake.events.onClose(4403, "revoked");
    fake.events.onClose(1000, "again");
    clock.step(2000);
    const r = await conn.done;
    expect(r).toMatchObject({ welcomed: false, code: 4403, reason: "revoked" });
    expect(fired).toBe(0);
    expect(counts().ended).toBe(1);
    expect(conn.send("x")).toBe(false);
  });

  test("a dial that throws ends the connection with code 1006", async () => {
    const conn = new Connection({
      clock: new FakeClock(),
      logger: nullLogger,
      dial: () => {
        throw new Error("bad url");
      },
      url: "ws://nowhere",
      credential: "c",
      onOpen: () => {},
      onFrame: () => {},
    });
    expect(await conn.done).toMatchObject({
      code: 1006,
      reason: expect.stringContaining("bad url"),
    });
  });
});

describe("routeHubFrame()", () => {
  function handlers() {
    const calls: string[] = [];
    const h: HubMessageHandlers = {
      welcome: (w) => calls.push(`welcome ${w.ackedSeq}`),
      ack: (seq) => calls.push(`ack ${seq}`),
      desired: (d) => calls.push(d.ok ? `desired ${d.message.generation}` : `bad ${d.generation}`),
      error: (e) => calls.push(`error ${e.code}`),
      refuse: (code, reason) =>
        calls.push(`refuse ${code} ${reason.split(" ").slice(0, 3).join(" ")}`),
    };
    return { h, calls };
  }

  test("calls the handler of each message type", () => {
    const { h, calls } = handlers();
    routeHubFrame(JSON.stringify(welcome({ ackedSeq: 4 })), false, h, nullLogger);
    routeHubFrame('{"type":"ack","seq":5}', true, h, nullLogger);
    routeHubFrame('{"type":"desired","generation":2,"pods":[]}', true, h, nullLogger);
    routeHubFrame('{"type":"error","code":"revoked","reason":"r"}', true, h, nullLogger);
    expect(calls).toEqual(["welcome 4", "ack 5", "desired 2", "error revoked"]);
  });

  test("a bad desired after welcome goes to its handler; before welcome it is refused", () => {
    const { h, calls } = handlers();
    routeHubFrame('{"type":"desired","generation":7,"pods":3}', true, h, nullLogger);
    routeHubFrame('{"type":"desired","generation":7,"pods":3}', false, h, nullLogger);
    expect(calls).toEqual(["bad 7", "refuse 4400 bad desired message:"]);
  });

  test("refuses what does not decode, and survives a handler that throws", () => {
    const { h, calls } = handlers();
    routeHubFrame("{nope", true, h, nullLogger);
    routeHubFrame('{"type":"reboot"}', true, h, nullLogger);
    h.ack = () => {
      throw new Error("boom");
    };
    routeHubFrame('{"type":"ack","seq":1}', true, h, nullLogger);
    expect(calls).toEqual(["refuse 4400 message is not", "refuse 4400 unknown message type"]);
  });

  test("stream messages and binary frames go to the extension once welcomed", () => {
    const { h, calls } = handlers();
    h.extension = {
      owns: (t) => t.startsWith("stream."),
      text: (v) => calls.push(`text ${String(v.type)}`),
      binary: (b) => calls.push(`binary ${b.length}`),
    };
    routeHubFrame('{"type":"stream.open","id":1}', true, h, nullLogger);
    routeHubFrame(new Uint8Array([1, 0, 0, 0, 1, 0, 9]), true, h, nullLogger);
    routeHubFrame(new Uint8Array([1]), false, h, nullLogger);
    expect(calls).toEqual(["text stream.open", "binary 7", "refuse 4400 binary frames are"]);
  });
});

describe("OutboxPump", () => {
  function pumpSetup() {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const outbox = outboxAt(t.dir);
    const { conn, fake, clock } = connection();
    fake.open();
    const pump = new OutboxPump(conn, outbox, clock, nullLogger);
    return { outbox, fake, clock, pump };
  }

  test("sends nothing before start, then what follows the hub's ackedSeq", () => {
    const { outbox, fake, pump } = pumpSetup();
    for (let i = 0; i < 3; i++) outbox.push({ type: "event", event: makeEvent(`e${i}`) });
    pump.pump();
    expect(fake.sent).toEqual([]);
    pump.start(welcome({ ackedSeq: 1 }));
    expect(fake.sent.map((m) => m.seq)).toEqual([2, 3]);
  });

  test("keeps within the rate, and take() spends the same budget", () => {
    const { outbox, fake, clock, pump } = pumpSetup();
    for (let i = 0; i < 6; i++) outbox.push({ type: "event", event: makeEvent(`e${i}`) });
    pump.start(welcome({ rateLimit: { messagesPerSecond: 10, burst: 3 } }));
    expect(fake.sent.length).toBe(2);
    expect(pump.take()).toBe(false);
    clock.step(1000);
    expect(fake.sent.length).toBe(6);
  });
});
