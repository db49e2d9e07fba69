// The compiled agent against a protocol-level hub written here, which sends it desired states
// no real hub would: a pod that fails validation and a message that does not decode. The agent
// must keep its pods, stay connected and say why, in its ack, an event and its log. Needs root
// and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Server } from "bun";
import { TestAgent } from "../lib/agent.ts";
import { eventually } from "../lib/testbed.ts";

type Msg = Record<string, unknown> & { type: string };
const received: Msg[] = [];
let hellos = 0;
let send: (m: unknown) => void = () => {};

const fake: Server<undefined> = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch(req, server) {
    return server.upgrade(req) ? undefined : new Response("upgrade", { status: 400 });
  },
  websocket: {
    message(ws, data) {
      const m = JSON.parse(String(data)) as Msg;
      received.push(m);
      if (m.type === "hello") {
        hellos++;
        send = (x) => ws.send(typeof x === "string" ? x : JSON.stringify(x));
        send({
          type: "welcome",
          protocolVersion: 1,
          heartbeatIntervalMs: 1000,
          ackedSeq: 0,
          maxMessageBytes: 1024 * 1024,
          rateLimit: { messagesPerSecond: 1000, burst: 1000 },
        });
      } else if (m.type === "hb") ws.send('{"type":"hb"}');
      else if (typeof m.seq === "number") ws.send(JSON.stringify({ type: "ack", seq: m.seq }));
    },
  },
});

const agent = new TestAgent({
  args: [
    "--hub",
    `http://127.0.0.1:${fake.port}`,
    "--hub-reconnect-back-off-base",
    "200ms",
    "--hub-reconnect-back-off-max",
    "1s",
  ],
});

function pod(name: string, uid: string, spec: Record<string, unknown>) {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: `${name}-${agent.nodeName}`, namespace: "default", uid },
    spec: { nodeName: agent.nodeName, ...spec },
  };
}

const acks = () => received.filter((m) => m.type === "desired.ack");

beforeAll(async () => {
  mkdirSync(join(agent.rootDir, "hub"), { recursive: true });
  writeFileSync(join(agent.rootDir, "hub", "credential"), "flc_fake\n", { mode: 0o600 });
  await agent.start();
}, 30_000);
afterAll(async () => {
  await agent.cleanup();
  await fake.stop(true);
}, 30_000);

describe("fleetlet agent fed bad desired states (needs root and the test bed)", () => {
  test("keeps its pods, stays connected, and says why in its ack, an event and its log", async () => {
    const hello = await eventually(
      "hello",
      async () => received.find((m) => m.type === "hello"),
      15_000,
    );
    expect(hello.features).toEqual(["desired-pods", "desired-config", "streams", "updates"]);
    const keep = pod("keep", "11111111-2222-3333-4444-555555555555", {
      terminationGracePeriodSeconds: 1,
      containers: [{ name: "main", image: agent.tb.busybox, command: ["sleep", "3600"] }],
    });
    send({ type: "desired", generation: 1, pods: [keep] });
    await eventually("ack of 1", async () => acks().find((a) => a.generation === 1), 10_000);
    const before = await agent.waitPod("keep", "Running", (p) => p.status?.phase === "Running");

    send({ type: "desired", generation: 2, pods: [pod("bad", "u2", {})] });
    const refused = await eventually(
      "the refusal of 2",
      async () =>
        acks().find((a) => (a.refused as { generation?: number } | undefined)?.generation === 2),
      10_000,
    );
    expect(refused.generation).toBe(1);
    expect((refused.refused as { reason: string }).reason).toBe(
      `pods[0] ("bad-${agent.nodeName}"): spec.containers: Required value`,
    );

    send('{"type":"desired","generation":3,"pods":"none"}');
    const undecodable = await eventually(
      "the refusal of 3",
      async () =>
        acks().find((a) => (a.refused as { generation?: number } | undefined)?.generation === 3),
      10_000,
    );
    expect((undecodable.refused as { reason: string }).reason).toContain(
      "bad desired message: pods:",
    );
    const event = await eventually(
      "a DesiredStateRefused event",
      async () =>
        received.find(
          (m) =>
            m.type === "event" && (m.event as { reason: string }).reason === "DesiredStateRefused",
        ),
      10_000,
    );
    expect((event.event as { message: string }).message).toContain(
      "desired state refused: pods[0]",
    );
    expect(agent.output).toContain(
      "refused the hub's desired state; pods keep running as they are",
    );

    await Bun.sleep(1500);
    const after = await agent.pod("keep");
    expect(after?.status?.containerStatuses?.[0]?.containerID).toBe(
      before.status?.containerStatuses?.[0]?.containerID,
    );
    expect(await agent.pod("bad")).toBeUndefined();
    expect(hellos).toBe(1);
  }, 60_000);
});
