import { afterEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import {
  createHubClient,
  type HubClientDeps,
  hubEndpoints,
  JoinError,
  loadOrJoin,
  readCredential,
  reconnectDelay,
  secretsAllowed,
} from "../../../src/agent/hubclient/index.ts";
import type { Pod } from "../../../src/api/types.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { fakeDial, makePod, node, outboxAt, tempDir } from "./fixtures.ts";

let cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups) c();
  cleanups = [];
});

function setup(overrides: Partial<HubClientDeps> = {}) {
  const t = tempDir();
  cleanups.push(t.cleanup);
  const clock = new FakeClock();
  const outbox = outboxAt(t.dir, 3);
  const { dial, conns } = fakeDial();
  const pods = new Map<string, Pod>();
  const nodeEvents: string[] = [];
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
    nodeEvent: (_t, reason, message) => nodeEvents.push(`${reason}: ${message}`),
    backoffBaseMs: 1000,
    backoffMaxMs: 8000,
    ...overrides,
  });
  return { clock, outbox, client, conns, pods, nodeEvents, dir: t.dir };
}

const flush = async () => {
  for (let i = 0; i < 10; i++) await Bun.sleep(0);
};

describe("reconnectDelay()", () => {
  test("is full jitter over a doubling window capped at max", () => {
    const opts = { baseMs: 1000, maxMs: 60_000, random: () => 0.999 };
    expect([0, 1, 2, 3, 10].map((a) => reconnectDelay(a, false, opts))).toEqual([
      999, 1998, 3996, 7992, 59_940,
    ]);
    expect(reconnectDelay(5, false, { ...opts, random: () => 0 })).toBe(0);
  });

  test("waits the cap after a refused credential", () => {
    expect(reconnectDelay(0, true, { baseMs: 1000, maxMs: 60_000, random: () => 0 })).toBe(60_000);
  });
});

describe("createHubClient()", () => {
  test("reconnects on the jittered backoff schedule while the hub is down", async () => {
    const { client, clock, conns } = setup();
    const ac = new AbortController();
    const running = client.run(ac.signal);
    const waits = [500, 1000, 2000, 4000, 4000];
    await flush();
    for (const [i, ms] of waits.entries()) {
      expect(conns).toHaveLength(i + 1);
      conns[i]?.events.onClose(1006, "connection refused");
      await flush();
      clock.step(ms - 1);
      await flush();
      expect(conns).toHaveLength(i + 1);
      clock.step(1);
      await flush();
    }
    expect(conns).toHaveLength(waits.length + 1);
    ac.abort();
    await running;
  });

  test("a welcome before every pod source was seen deletes the gone pods once they all are", async () => {
    let synced = false;
    const { client, conns, pods, outbox, clock } = setup({ podsSynced: () => synced });
    outbox.push({ type: "pod.upsert", uid: "gone", pod: makePod("gone") });
    outbox.push({ type: "pod.upsert", uid: "u1", pod: makePod("u1") });
    outbox.ack(2);
    pods.set("u1", makePod("u1"));
    const ac = new AbortController();
    const running = client.run(ac.signal);
    await flush();
    const conn = conns[0];
    conn?.open();
    conn?.welcome(2);
    const types = () => conn?.sent.slice(1).map((m) => [m.type, m.uid]) ?? [];
    clock.step(3000);
    await flush();
    expect(types()).toEqual([["node", undefined]]);
    synced = true;
    clock.step(1000);
    await flush();
    expect(types()).toEqual([
      ["node", undefined],
      ["pod.delete", "gone"],
    ]);
    ac.abort();
    await running;
  });

  test("on welcome sends the node, every pod not yet reported, and deletes for gone pods", async () => {
    const { client, conns, pods, outbox } = setup();
    outbox.push({ type: "pod.upsert", uid: "gone", pod: makePod("gone") });
    outbox.ack(1);
    pods.set("u1", makePod("u1"));
    const ac = new AbortController();
    const running = client.run(ac.signal);
    await flush();
    const conn = conns[0];
    conn?.open();
    conn?.welcome(1);
    const sent = conn?.sent.slice(1).map((m) => [m.type, m.uid]) ?? [];
    expect(sent).toEqual([
      ["node", undefined],
      ["pod.upsert", "u1"],
      ["pod.delete", "gone"],
    ]);
    ac.abort();
    await running;
  });

  test("resends every pod when the hub has nothing of the stream (ackedSeq 0)", async () => {
    const { client, conns, pods } = setup();
    pods.set("u1", makePod("u1"));
    client.podChanged("u1");
    const ac = new AbortController();
    const running = client.run(ac.signal);
    await flush();
    conns[0]?.open();
    conns[0]?.welcome(0);
    expect(conns[0]?.sent.slice(1).map((m) => [m.type, m.seq])).toEqual([
      ["node", 2],
      ["pod.upsert", 3],
    ]);
    ac.abort();
    await running;
  });

  test("queues pod changes only when the pod changed, and a delete when it is gone", () => {
    const { client, pods, outbox } = setup();
    pods.set("u1", makePod("u1"));
    client.podChanged("u1");
    client.podChanged("u1");
    expect(outbox.lastSeq).toBe(1);
    pods.delete("u1");
    client.podChanged("u1");
    expect(outbox.entries().map((m) => m.type)).toEqual(["pod.delete"]);
    client.podChanged("never-seen");
    expect(outbox.lastSeq).toBe(2);
  });

  test("reports events dropped while disconnected once, on reconnect", async () => {
    const { client, conns, nodeEvents } = setup();
    for (let i = 0; i < 8; i++) {
      client.event({
        apiVersion: "v1",
        kind: "Event",
        metadata: { name: `e${i}` },
        involvedObject: {},
        reason: "R",
        message: "m",
        type: "Normal",
        source: {},
        count: 1,
        firstTimestamp: "",
        lastTimestamp: "",
      });
    }
    const ac = new AbortController();
    const running = client.run(ac.signal);
    await flush();
    conns[0]?.open();
    conns[0]?.welcome(0);
    expect(nodeEvents).toEqual([
      "EventsDropped: dropped 5 events while disconnected from the hub (outbox full)",
    ]);
    ac.abort();
    await running;
  });

  test("a refused join waits the backoff cap and keeps trying", async () => {
    const { client, clock, conns } = setup({
      credential: async () => {
        throw new JoinError("the hub refused to join: join token expired", true);
      },
    });
    const ac = new AbortController();
    const running = client.run(ac.signal);
    await flush();
    const r = await client.connectOnce(ac.signal);
    expect(r.permanent).toBe(true);
    clock.step(8000);
    await flush();
    expect(conns).toHaveLength(0);
    ac.abort();
    await running;
  });
});

describe("loadOrJoin()", () => {
  test("exchanges the join token once and saves the credential 0600", async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const path = join(t.dir, "hub", "credential");
    const calls: string[] = [];
    const fetch = async (url: string, init: RequestInit) => {
      calls.push(`${url} ${init.body}`);
      return Response.json({ nodeName: "cam-1", credential: "flc_abc" });
    };
    const input = {
      hubUrl: "wss://hub.example:7443",
      joinToken: "flj_t",
      nodeName: "cam-1",
      credentialPath: path,
      fetch,
    };
    expect(await loadOrJoin(input)).toBe("flc_abc");
    expect(await loadOrJoin(input)).toBe("flc_abc");
    expect(calls).toEqual([
      'https://hub.example:7443/api/v1/join {"joinToken":"flj_t","nodeName":"cam-1"}',
    ]);
    expect(readCredential(path)).toBe("flc_abc");
    expect((await Bun.file(path).stat()).mode & 0o777).toBe(0o600);
  });

  test("says why the hub refused the join", async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const fetch = async () =>
      Response.json(
        { kind: "Status", message: "join token expired at 2026-01-01T00:00:00Z" },
        { status: 401 },
      );
    const err = await loadOrJoin({
      hubUrl: "http://127.0.0.1:7443",
      joinToken: "flj_t",
      nodeName: "cam-1",
      credentialPath: join(t.dir, "credential"),
      fetch,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(JoinError);
    expect((err as JoinError).message).toBe(
      'the hub refused to join node "cam-1": join token expired at 2026-01-01T00:00:00Z',
    );
    expect((err as JoinError).permanent).toBe(true);
  });

  test("hubEndpoints() derives the join base and the connect URL", () => {
    expect(hubEndpoints("http://127.0.0.1:7443/")).toEqual({
      http: "http://127.0.0.1:7443",
      connect: "ws://127.0.0.1:7443/api/v1/agent/connect",
    });
    expect(hubEndpoints("wss://hub").connect).toBe("wss://hub/api/v1/agent/connect");
  });
});

/** A desired handler that records what it accepted; refuses pods named "bad". */
function fakeDesired() {
  const accepted: { generation: number; secrets?: unknown[] }[] = [];
  const conflicts: { pod: string; uid: string; message: string }[] = [];
  let generation = 2;
  return {
    accepted,
    conflicts,
    handler: {
      get generation() {
        return generation;
      },
      accept(input: { generation: number; pods: unknown[]; secrets?: unknown[] }) {
        if (input.pods.includes("bad")) return { ok: false as const, reason: "pods[0]: not a pod" };
        accepted.push({
          generation: input.generation,
          ...(input.secrets !== undefined && { secrets: input.secrets }),
        });
        generation = input.generation;
        return { ok: true as const };
      },
      conflicts: () => conflicts,
    },
  };
}

async function welcomed(overrides: Partial<HubClientDeps>) {
  const s = setup(overrides);
  const ac = new AbortController();
  const running = s.client.run(ac.signal);
  await flush();
  const conn = s.conns[0];
  if (conn === undefined) throw new Error("no connection");
  conn.open();
  conn.welcome(0);
  const stop = async () => {
    ac.abort();
    await running;
  };
  return { ...s, conn, stop };
}

describe("createHubClient() and the hub's desired state", () => {
  test("announces that it runs hub pods and the generation it has, and reports after welcome", async () => {
    const d = fakeDesired();
    const { conn, stop } = await welcomed({ desired: d.handler });
    expect(conn.sent[0]).toMatchObject({
      desiredGeneration: 2,
      features: ["desired-pods", "desired-config"],
    });
    expect(conn.sent.find((m) => m.type === "desired.ack")).toEqual({
      type: "desired.ack",
      generation: 2,
    });
    await stop();
  });

  test("an agent without a handler announces nothing and sends no desired.ack", async () => {
    const { conn, stop } = await welcomed({});
    expect(conn.sent[0]).toMatchObject({ desiredGeneration: 0, features: [] });
    expect(conn.sent.map((m) => m.type)).not.toContain("desired.ack");
    await stop();
  });

  test("applies a new generation and acknowledges it; the same generation again changes nothing", async () => {
    const d = fakeDesired();
    const { conn, stop } = await welcomed({ desired: d.handler });
    conn.receive({ type: "desired", generation: 5, pods: [] });
    expect(conn.sent.at(-1)).toEqual({ type: "desired.ack", generation: 5 });
    conn.receive({ type: "desired", generation: 5, pods: [] });
    expect(conn.sent.at(-1)).toEqual({ type: "desired.ack", generation: 5 });
    expect(d.accepted.map((a) => a.generation)).toEqual([5]);
    await stop();
  });

  test("a refused state keeps the old generation, says why to the hub and records an event", async () => {
    const d = fakeDesired();
    const { conn, nodeEvents, stop } = await welcomed({ desired: d.handler });
    conn.receive({ type: "desired", generation: 6, pods: ["bad"] });
    expect(conn.sent.at(-1)).toEqual({
      type: "desired.ack",
      generation: 2,
      refused: { generation: 6, reason: "pods[0]: not a pod" },
    });
    expect(nodeEvents).toContain("DesiredStateRefused: desired state refused: pods[0]: not a pod");
    expect(conn.closed).toBeUndefined();
    conn.receive({ type: "desired", generation: 7, pods: [] });
    expect(conn.sent.at(-1)).toEqual({ type: "desired.ack", generation: 7 });
    await stop();
  });

  test("Secrets over plain ws:// to a remote hub are dropped; over loopback they are kept", async () => {
    const d = fakeDesired();
    const { conn, stop } = await welcomed({ desired: d.handler });
    conn.receive({ type: "desired", generation: 8, pods: [], secrets: [{ kind: "Secret" }] });
    expect(d.accepted.at(-1)).toEqual({ generation: 8 });
    await stop();
    expect(secretsAllowed("ws://127.0.0.1:7443/api/v1/agent/connect")).toBe(true);
    expect(secretsAllowed("ws://[::1]:7443/x")).toBe(true);
    expect(secretsAllowed("wss://hub.example/x")).toBe(true);
    expect(secretsAllowed("ws://10.0.0.2:7443/x")).toBe(false);
  });

  test("desiredChanged() reports the conflicts to the connected hub", async () => {
    const d = fakeDesired();
    const { conn, client, stop } = await welcomed({ desired: d.handler });
    d.conflicts.push({ pod: "default/web-cam-1", uid: "u1", message: "taken by a file pod" });
    client.desiredChanged();
    expect(conn.sent.at(-1)).toEqual({
      type: "desired.ack",
      generation: 2,
      conflicts: [{ pod: "default/web-cam-1", uid: "u1", message: "taken by a file pod" }],
    });
    await stop();
  });
});
