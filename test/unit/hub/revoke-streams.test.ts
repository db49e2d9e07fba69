// A revoked device's streams end at once (src/hub/sessions.ts with the stream broker): its agent
// WebSocket is closed with `revoked`, and every logs, exec, port-forward stream the hub relays
// for it ends with a Status that says the node was revoked.
import { describe, expect, test } from "bun:test";
import { Identity } from "../../../src/hub/identity.ts";
import { AgentSessions, type AgentSocket } from "../../../src/hub/sessions.ts";
import { SqliteHubStore } from "../../../src/hub/store-sqlite.ts";
import { StreamBroker } from "../../../src/hub/streams/broker.ts";
import { AGENT_FEATURES, PROTOCOL_VERSION, type StreamOpen } from "../../../src/protocol/index.ts";
import type { StreamError } from "../../../src/protocol/streams.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { testFleet } from "../../lib/hub-fleet.ts";

async function hubWithDevice() {
  const clock = new FakeClock();
  const store = new SqliteHubStore(":memory:");
  const loaded = await store.load();
  const fleet = testFleet(store, loaded, clock);
  const identity = new Identity({ store, nodes: fleet.nodes, now: () => clock.now() }, loaded);
  const tok = await identity.createJoinToken(60_000, {}, clock.now());
  const { credential } = await identity.join(
    { joinToken: tok.token, nodeName: "cam-1" },
    clock.now(),
  );
  let sessions: AgentSessions | undefined;
  const broker = new StreamBroker({
    log: nullLogger,
    connection: (node) => sessions?.connection(node),
  });
  sessions = new AgentSessions({
    fleet,
    identity,
    clock,
    log: nullLogger,
    heartbeatIntervalMs: 10_000,
    maxMessageBytes: 1 << 20,
    rateLimit: { messagesPerSecond: 100, burst: 100 },
    helloTimeoutMs: 5000,
    markDirty: () => {},
    flushNow: () => {},
    broker,
  });
  const sent: Record<string, unknown>[] = [];
  const ws: AgentSocket & { closedWith?: number } = {
    data: sessions.newData(credential, true),
    send: (t) => {
      if (typeof t === "string") sent.push(JSON.parse(t));
    },
    close(code) {
      this.closedWith = code;
    },
  };
  sessions.open(ws);
  sessions.message(
    ws,
    JSON.stringify({
      type: "hello",
      protocolVersion: PROTOCOL_VERSION,
      nodeName: "cam-1",
      agentVersion: "0.1.0",
      streamId: "s1",
      features: [AGENT_FEATURES.streams],
    }),
  );
  return { sessions, broker, ws, sent, identity, clock };
}

function client() {
  const ends: { exitCode?: number; error?: StreamError }[] = [];
  return {
    ends,
    out: {
      write: async () => {},
      end: (r: { exitCode?: number; error?: StreamError }) => void ends.push(r),
    },
  };
}

const base = { type: "stream.open" as const, id: 0, window: 0, namespace: "default", pod: "web" };
const opens: [string, StreamOpen][] = [
  ["logs (follow)", { ...base, kind: "logs", follow: true }],
  ["exec", { ...base, kind: "exec", command: ["sh"], stdin: true }],
  ["port-forward", { ...base, kind: "portforward", port: 80 }],
];

describe("revoking a node", () => {
  test.each(opens)(
    "ends its open %s stream at once with a Status saying it was revoked",
    async (_n, open) => {
      const { sessions, broker, ws, sent, identity, clock } = await hubWithDevice();
      const c = client();
      const opened = broker.opener("cam-1")(open, c.out, new AbortController().signal);
      const req = sent.find((m) => m.type === "stream.open") as { id: number };
      sessions.message(ws, JSON.stringify({ type: "stream.ready", id: req.id, window: 65536 }));
      await opened;
      await identity.revokeNode("cam-1", clock.now());
      sessions.revoked("cam-1");
      expect(ws.closedWith).toBe(4403);
      expect(c.ends).toEqual([
        { error: { code: 503, reason: "ServiceUnavailable", message: 'node "cam-1" was revoked' } },
      ]);
    },
  );

  test("a stream still starting is refused with the same reason", async () => {
    const { sessions, broker } = await hubWithDevice();
    const opened = broker.opener("cam-1")(
      opens[0]?.[1] as StreamOpen,
      client().out,
      new AbortController().signal,
    );
    sessions.revoked("cam-1");
    await expect(opened).rejects.toMatchObject({ code: 503, message: 'node "cam-1" was revoked' });
  });

  test("no new stream opens to it afterwards", async () => {
    const { sessions, broker } = await hubWithDevice();
    sessions.revoked("cam-1");
    await expect(
      broker.opener("cam-1")(
        opens[1]?.[1] as StreamOpen,
        client().out,
        new AbortController().signal,
      ),
    ).rejects.toMatchObject({ code: 503 });
  });
});
