// The hub client resuming its stream after faults the chaos soak piled up (seed 30030):
// - the hub's record of the stream differs from the outbox's: it stored records the outbox lost
//   (a full disk, then the agent killed: the hub kept showing a pod the device had removed, as the
//   outbox no longer knew that it had reported it), or it lost records it had acknowledged. The
//   agent starts a new stream (the hub forgets the node's pods) and dials again at once;
// - the hub restarted while the device's wall clock was hours ahead, then the wall clock stepped
//   back by hours, then static pods edited (round 5). Before the session's rate budget and
//   heartbeat were timed on the monotonic clock, the step back left the budget hours in debt and
//   the heartbeat waiting for a wall time hours away: the hub marked the device offline after
//   30 s and kept old pod uids for as long as the step.
import { afterEach, describe, expect, test } from "bun:test";
import { createHubClient } from "../../../src/agent/hubclient/index.ts";
import type { Pod } from "../../../src/api/types.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import {
  type FakeConn,
  fakeDial,
  makeEvent,
  makePod,
  node,
  outboxAt,
  tempDir,
} from "./fixtures.ts";

const SECOND = 1000;
const HEARTBEAT = 10 * SECOND;
/** The hub's offline detection: no message for three heartbeat intervals. */
const OFFLINE_AFTER = 3 * HEARTBEAT;

let cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
});

const flush = async () => {
  for (let i = 0; i < 10; i++) await Bun.sleep(0);
};

function setup() {
  const t = tempDir();
  cleanups.push(t.cleanup);
  const clock = new FakeClock();
  const outbox = outboxAt(t.dir);
  const { dial, conns } = fakeDial();
  const pods = new Map<string, Pod>();
  const client = createHubClient({
    clock,
    logger: nullLogger,
    random: () => 0.5,
    hubUrls: ["ws://hub.test"],
    nodeName: "cam-1",
    agentVersion: "0.1.0",
    outbox,
    credential: async () => "flc_x",
    dial,
    node,
    pod: (uid) => pods.get(uid),
    pods: () => [...pods.values()],
    podsSynced: () => true,
    nodeEvent: () => {},
    backoffBaseMs: 1000,
    backoffMaxMs: 8000,
  });
  return { clock, outbox, client, conns, pods, dir: t.dir };
}

/** Plays the hub on `conn`: acknowledges everything sent and answers each heartbeat. */
function hubAnswers(conn: FakeConn, seen: number): number {
  for (const m of conn.sent.slice(seen)) {
    if (typeof m.seq === "number") conn.receive({ type: "ack", seq: m.seq });
    if (m.type === "hb") conn.receive({ type: "hb" });
  }
  return conn.sent.length;
}

/** Lets `ms` pass a second at a time, the hub answering on `conn`; the device is never silent for
 * as long as the hub takes to call it offline. Returns how many messages the hub has seen. */
function hubHearsFromTheDevice(clock: FakeClock, conn: FakeConn, seen: number, ms: number) {
  let lastHeard = clock.monotonic();
  for (let t = 0; t < ms; t += SECOND) {
    clock.step(SECOND);
    if (conn.sent.length > seen) lastHeard = clock.monotonic();
    seen = hubAnswers(conn, seen);
    expect(clock.monotonic() - lastHeard).toBeLessThan(OFFLINE_AFTER);
  }
  return seen;
}

/** The hub's rate limit as a running hub announces it (a budget that a debt of hours of refill
 * at this rate would empty for as long). */
const RATE = { messagesPerSecond: 20, burst: 40 };

describe("the hub client across a hub restart and a wall step back of hours", () => {
  test("pod edits after the step reach the hub at once, and the hub never hears nothing for three heartbeat intervals", async () => {
    const { clock, client, conns, pods, outbox } = setup();
    for (const uid of ["steady", "flap"]) pods.set(uid, makePod(uid));
    const ac = new AbortController();
    const running = client.run(ac.signal);
    await flush();
    clock.stepWall(8_250 * SECOND);
    conns[0]?.open();
    conns[0]?.welcome(0, { rateLimit: RATE });
    if (conns[0] !== undefined) hubAnswers(conns[0], 0);

    // The hub is killed and restarted; the agent dials again and is welcomed with what it stored.
    conns[0]?.events.onClose(1006, "connection closed");
    await flush();
    clock.step(2 * SECOND);
    await flush();
    const conn = conns[1];
    if (conn === undefined) throw new Error("the agent did not dial the restarted hub");
    conn.open();
    conn.welcome(outbox.ackedSeq, { rateLimit: RATE });
    let seen = hubAnswers(conn, 0);

    clock.stepWall(-8_088 * SECOND);
    seen = hubHearsFromTheDevice(clock, conn, seen, 60 * SECOND);
    pods.delete("steady");
    pods.set("steady-v2", makePod("steady-v2"));
    for (const uid of ["steady", "steady-v2"]) client.podChanged(uid);
    clock.step(SECOND);
    expect(conn.sent.slice(seen).map((m) => [m.type, m.uid])).toEqual([
      ["pod.delete", "steady"],
      ["pod.upsert", "steady-v2"],
    ]);
    hubHearsFromTheDevice(clock, conn, seen, 60 * SECOND);
    expect(conn.closed).toBeUndefined();
    ac.abort();
    await running;
  });
});

describe("the hub client when the hub's record of its stream differs from the outbox's", () => {
  test.each([
    ["stored records the outbox lost", 9],
    ["lost records it had acknowledged", 1],
    ["has nothing of a stream it acknowledged", 0],
  ])(
    "when the hub %s, starts a new stream and sends the node and every pod on it",
    async (_what, hubSeq) => {
      const { client, clock, conns, pods, outbox, dir } = setup();
      pods.set("u1", makePod("u1"));
      client.podChanged("u1");
      client.event(makeEvent("e0"));
      outbox.ack(2);
      client.event(makeEvent("e1"));
      const first = outbox.streamId;
      const ac = new AbortController();
      const running = client.run(ac.signal);
      await flush();
      conns[0]?.open();
      conns[0]?.welcome(hubSeq);
      expect(conns[0]?.sent.map((m) => m.type)).toEqual(["hello"]);
      expect(conns[0]?.closed?.code).toBe(4000);
      await flush();
      clock.step(500);
      await flush();
      const conn = conns[1];
      conn?.open();
      expect(conn?.sent[0]).toMatchObject({ type: "hello", lastAckedSeq: 0 });
      expect(conn?.sent[0]?.streamId).not.toBe(first);
      conn?.welcome(0);
      const sent = conn?.sent.slice(1).map((m) => [m.type, m.seq]);
      // Behind the outbox, the hub never got e1: it is sent on the new stream.
      const kept = hubSeq < 3 ? [["event", 1]] : [];
      expect(sent).toEqual([...kept, ["node", kept.length + 1], ["pod.upsert", kept.length + 2]]);
      expect(outboxAt(dir, 3).streamId).toBe(conn?.sent[0]?.streamId as string);
      ac.abort();
      await running;
    },
  );
});
