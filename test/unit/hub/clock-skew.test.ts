// The hub's view of each device's clock (docs/protocol.md, "Clock skew"): computed from the clock
// an agent sends in hello and hb, kept on the node (stored with it, so that every hub replica shows
// it) and shown as an annotation of its Node.
import { describe, expect, test } from "bun:test";
import { clockSkew } from "../../../src/hub/agent-router.ts";
import type { Change } from "../../../src/hub/fleet.ts";
import { ReplicaFleet } from "../../../src/hub/fleet-replica.ts";
import { Identity } from "../../../src/hub/identity.ts";
import { AgentSessions, type AgentSocket } from "../../../src/hub/sessions.ts";
import type { NodeRecord } from "../../../src/hub/store.ts";
import { SqliteHubStore } from "../../../src/hub/store-sqlite.ts";
import { skewText } from "../../../src/hub/views.ts";
import { HUB_ANNOTATIONS, PROTOCOL_VERSION } from "../../../src/protocol/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { testFleet } from "../../lib/hub-fleet.ts";

const HOUR = 3_600_000;

async function hub() {
  const clock = new FakeClock(Date.UTC(2026, 5, 1, 12));
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
    fleet,
    identity,
    clock,
    log: nullLogger,
    heartbeatIntervalMs: 10_000,
    maxMessageBytes: 1 << 20,
    rateLimit: { messagesPerSecond: 10, burst: 5 },
    helloTimeoutMs: 5000,
    markDirty: () => {},
    flushNow: () => {},
  });
  const sent: Record<string, unknown>[] = [];
  const ws: AgentSocket = {
    data: sessions.newData(credential, true),
    send: (t) => sent.push(JSON.parse(String(t))),
    close() {},
  };
  sessions.open(ws);
  const say = (m: object) => sessions.message(ws, JSON.stringify(m));
  const skew = () => fleet.view("cam-1")?.metadata.annotations?.[HUB_ANNOTATIONS.clockSkew];
  const nodeChanges = () => changes.filter((c) => c.kind === "nodes").length;
  return { clock, say, skew, sent, nodeChanges, store };
}

const hello = {
  type: "hello",
  protocolVersion: PROTOCOL_VERSION,
  nodeName: "cam-1",
  agentVersion: "0.1.0",
  streamId: "s1",
};

describe("clockSkew()", () => {
  test.each([
    ["a device 3 hours behind", 1_000 - 3 * HOUR, 1_000, 0, -3 * HOUR],
    ["a device ahead, with a 200 ms round trip", 10_000, 5_000, 200, 5_100],
    ["a device in 1970", 60_000, Date.UTC(2026, 0, 1), 0, 60_000 - Date.UTC(2026, 0, 1)],
  ])("%s", (_name, agent, hub, rtt, want) => {
    expect(clockSkew(agent, hub, rtt)).toBe(want);
  });
});

describe("skewText()", () => {
  test.each([
    [0, "0s"],
    [-400, "0s"],
    [45_400, "45s"],
    [-(3 * HOUR + 12_000), "-3h0m12s"],
    [125_000, "2m5s"],
    [-Date.UTC(2026, 0, 1), "-490896h0m0s"],
  ])("%d ms reads %s", (ms, want) => {
    expect(skewText(ms)).toBe(want);
  });
});

describe("the hub's clock skew of a node", () => {
  test("a node that never sent its clock has no skew annotation", async () => {
    const { say, skew } = await hub();
    say(hello);
    say({ type: "hb" });
    expect(skew()).toBeUndefined();
  });

  test("hello's clock gives the skew; hb's clock and round trip update it", async () => {
    const { clock, say, skew, sent } = await hub();
    say({ ...hello, clock: clock.now() - 3 * HOUR });
    expect(sent[0]?.type).toBe("welcome");
    expect(skew()).toBe("-3h0m0s");
    clock.step(10_000);
    say({ type: "hb", clock: clock.now() + 10 * 60_000 - 1_000, rttMs: 2_000 });
    expect(sent.at(-1)).toEqual({ type: "hb" });
    expect(skew()).toBe("10m0s");
  });

  test("jitter under 2 s changes neither the shown skew nor tells watchers", async () => {
    const { clock, say, skew, nodeChanges } = await hub();
    say({ ...hello, clock: clock.now() + 30_000 });
    const before = nodeChanges();
    for (const off of [30_900, 29_200, 31_500]) {
      clock.step(10_000);
      say({ type: "hb", clock: clock.now() + off });
    }
    expect(skew()).toBe("30s");
    expect(nodeChanges()).toBe(before);
    say({ type: "hb", clock: clock.now() + 33_000 });
    expect(skew()).toBe("33s");
    expect(nodeChanges()).toBe(before + 1);
  });

  test("is stored with the node, and a replica that does not hold it shows it from the row", async () => {
    const { clock, say, store } = await hub();
    const queued: (number | undefined)[] = [];
    const queue = store.queueProgress.bind(store);
    store.queueProgress = (p, seqOnly) => {
      queued.push(p.clockSkewMs);
      queue(p, seqOnly);
    };
    say({ ...hello, clock: clock.now() - 3 * HOUR });
    expect(queued.at(-1)).toBe(-3 * HOUR);
    await store.flush();
    const rec = (await store.load()).nodes.find((n) => n.name === "cam-1");
    const other = new ReplicaFleet(
      {
        ...{ store: new SqliteHubStore(":memory:"), maxEventsPerNode: 10, offlineAfterMs: 30_000 },
        ...{ onChange: () => {}, now: () => clock.now(), storedOnline: true },
      },
      { ...(await new SqliteHubStore(":memory:").load()), nodes: [] },
    );
    other.applyStoredNode({ ...(rec as NodeRecord), online: true });
    expect(other.view("cam-1")?.metadata.annotations?.[HUB_ANNOTATIONS.clockSkew]).toBe("-3h0m0s");
  });
});
