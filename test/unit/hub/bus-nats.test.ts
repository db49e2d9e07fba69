// The NATS bus against a real nats-server on 127.0.0.1 (scripts/lib/nats.ts).
// NEEDS nats-server (Debian's package nats-server): without it these tests fail, saying so.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect } from "@nats-io/transport-node";
import { type NatsServer, startNatsServer } from "../../../scripts/lib/nats.ts";
import type { BusMessage } from "../../../src/hub/bus.ts";
import { createNatsBus, type NatsBus } from "../../../src/hub/bus-nats.ts";
import { realClock } from "../../../src/util/clock.ts";
import { createLogger } from "../../../src/util/log.ts";
import { until } from "../../lib/until.ts";

let nats: NatsServer;
const buses: NatsBus[] = [];

beforeAll(async () => {
  nats = await startNatsServer();
});

afterAll(async () => {
  await Promise.all(buses.map((b) => b.close()));
  await nats?.stop();
});

/** A bus on `servers` that records what it hears, its gaps, and its warnings. */
function makeBus(name: string, servers = [nats.url], reconnectMinMs = 50) {
  const warnings: string[] = [];
  const log = createLogger({ level: "warn", write: (line) => warnings.push(line) });
  const bus = createNatsBus({
    servers,
    clock: realClock,
    log,
    name,
    reconnectMinMs,
    reconnectMaxMs: Math.max(200, reconnectMinMs),
  });
  buses.push(bus);
  const heard: BusMessage[] = [];
  let gaps = 0;
  bus.subscribe("desired", (m) => heard.push(m));
  bus.subscribe("changes", (m) => heard.push(m));
  bus.subscribe("taken", (m) => heard.push(m));
  bus.onGap(() => gaps++);
  return { bus, heard, warnings, gaps: () => gaps };
}

const a1: BusMessage = { type: "desired", node: "cam.site-1" };
const a2: BusMessage = { type: "changes", rv: 17 };
const a3: BusMessage = { type: "taken", node: "cam.site-1", replica: "hub-a", epoch: 3 };
const b1: BusMessage = { type: "changes", rv: 18 };

describe("createNatsBus()", () => {
  test("two buses hear each other's messages and their own, each replica's in order", async () => {
    const a = makeBus("hub-a");
    const b = makeBus("hub-b");
    await Promise.all([a.bus.ready(), b.bus.ready()]);
    expect([a.gaps(), b.gaps()]).toEqual([1, 1]);
    for (const m of [a1, a2, a3]) a.bus.publish(m);
    b.bus.publish(b1);
    await until("both buses hear 4 messages", () => a.heard.length + b.heard.length >= 8);
    for (const { heard } of [a, b]) {
      expect(heard.filter((m) => !(m.type === "changes" && m.rv === 18))).toEqual([a1, a2, a3]);
      expect(heard).toContainEqual(b1);
    }
    expect(a.bus.stats()).toMatchObject({ published: 3, received: 4, dropped: 0, malformed: 0 });
  });

  test("a message for a node whose name is not a subject is dropped at publish, not thrown", async () => {
    const a = makeBus("hub-bad-name");
    await a.bus.ready();
    a.bus.publish({ type: "desired", node: "a.*" });
    a.bus.publish({ type: "desired", node: "ok" });
    await until("the valid message", () => a.heard.length === 1);
    expect(a.heard).toEqual([{ type: "desired", node: "ok" }]);
    expect(a.bus.stats().dropped).toBe(1);
    expect(a.warnings.join("\n")).toContain("invalid node name");
  });

  test("malformed messages on the bus's subjects are logged and dropped; the next is heard", async () => {
    const a = makeBus("hub-malformed");
    await a.bus.ready();
    const raw = await connect({ servers: [nats.url] });
    raw.publish("fleet.changes", "not json");
    raw.publish("fleet.changes", '{"rv":-4}');
    raw.publish("fleet.node.x.taken", '{"replica":"hub-z"}');
    raw.publish("fleet.node.UPPER.desired", "{}");
    raw.publish("fleet.node.x.stream", "whatever: not ours");
    raw.publish("fleet.node.x.desired", "{}");
    await raw.flush();
    await raw.close();
    await until("the valid message", () => a.heard.length === 1);
    expect(a.heard).toEqual([{ type: "desired", node: "x" }]);
    expect(a.bus.stats()).toMatchObject({ malformed: 4, received: 1 });
    expect(a.warnings.filter((w) => w.includes("malformed bus message dropped"))).toHaveLength(4);
  });

  test("a subscriber that throws is logged; the others still hear the message", async () => {
    const a = makeBus("hub-throws");
    await a.bus.ready();
    a.bus.subscribe("changes", () => {
      throw new Error("subscriber broke");
    });
    const after: BusMessage[] = [];
    a.bus.subscribe("changes", (m) => after.push(m));
    a.bus.publish({ type: "changes", rv: 1 });
    await until("the message, after the subscriber that throws", () => after.length === 1);
    expect(a.warnings.join("\n")).toContain("subscriber broke");
  });
});

describe("createNatsBus() across a nats-server restart", () => {
  test("both buses reconnect, report the possible gap, and hear what is published afterwards", async () => {
    const a = makeBus("hub-a-restart");
    const b = makeBus("hub-b-restart");
    await Promise.all([a.bus.ready(), b.bus.ready()]);
    await nats.restart();
    await until("both buses to report a second gap", () => a.gaps() === 2 && b.gaps() === 2);
    a.bus.publish({ type: "changes", rv: 100 });
    b.bus.publish({ type: "desired", node: "after-restart" });
    await until("both messages on both", () => a.heard.length >= 2 && b.heard.length >= 2);
    for (const { heard } of [a, b])
      expect(heard).toEqual(
        expect.arrayContaining([
          { type: "changes", rv: 100 },
          { type: "desired", node: "after-restart" },
        ]),
      );
    expect(a.warnings.join("\n")).toContain("lost the NATS connection");
  }, 20_000);

  test("what a bus publishes while it knows it is disconnected is held and sent on reconnection", async () => {
    // The publisher waits 2 s between attempts, so a listener that connects once the server is
    // back is subscribed before the publisher reconnects (checked below, not assumed).
    const a = makeBus("hub-a-down", [nats.url], 2_000);
    await a.bus.ready();
    const restarted = nats.restart({ downMs: 200 });
    await until("the bus to notice the loss", () =>
      a.warnings.some((w) => w.includes("lost the NATS connection")),
    );
    a.bus.publish({ type: "desired", node: "while-down" });
    await restarted;
    const listener = await connect({ servers: [nats.url] });
    const heard: string[] = [];
    listener.subscribe("fleet.node.>", {
      callback: (_, msg) => {
        heard.push(msg.subject);
      },
    });
    await listener.flush();
    expect(a.gaps()).toBe(1); // not reconnected yet: what it sends next is what it held
    await until("the listener to hear it", () => heard.length === 1, 15_000);
    await listener.close();
    expect(heard).toEqual(["fleet.node.while-down.desired"]);
    expect(a.gaps()).toBe(2);
    expect(a.bus.stats()).toMatchObject({ published: 1, dropped: 0 });
  }, 20_000);

  test("a bus started before its server holds what it publishes and sends it once connected", async () => {
    const later = await startNatsServer();
    const port = later.port;
    await later.stop();
    const a = makeBus("hub-early", [`nats://127.0.0.1:${port}`]);
    a.bus.publish({ type: "changes", rv: 5 });
    await until("a failed connection attempt", () =>
      a.warnings.some((w) => w.includes("cannot connect to NATS")),
    );
    const server = await startNatsServer({ port });
    try {
      await a.bus.ready();
      await until("the held message", () => a.heard.length === 1);
      expect(a.heard).toEqual([{ type: "changes", rv: 5 }]);
      expect(a.gaps()).toBe(1);
    } finally {
      await a.bus.close();
      await server.stop();
    }
  }, 20_000);

  test("a bus closed before it ever connected stops trying, and ready() rejects", async () => {
    const unused = await startNatsServer();
    const port = unused.port;
    await unused.stop();
    const a = makeBus("hub-never", [`nats://127.0.0.1:${port}`]);
    await a.bus.close();
    await expect(a.bus.ready()).rejects.toThrow("closed before it connected");
    a.bus.publish({ type: "changes", rv: 1 });
    expect(a.bus.stats()).toMatchObject({ dropped: 1, connections: 0 });
  });
});

describe("createNatsBus() latency (printed, not asserted)", () => {
  test("1,000 messages from one bus to another, one at a time and all at once", async () => {
    const a = makeBus("hub-lat-a");
    const b = makeBus("hub-lat-b");
    await Promise.all([a.bus.ready(), b.bus.ready()]);
    const n = 1_000;
    const sentAt = new Map<number, number>();
    const took: number[] = [];
    b.bus.subscribe("changes", (m) => {
      const t = sentAt.get(m.rv);
      if (t !== undefined) took.push(performance.now() - t);
    });
    for (let rv = 1; rv <= n; rv++) {
      sentAt.set(rv, performance.now());
      a.bus.publish({ type: "changes", rv });
      await until(`message ${rv}`, () => took.length === rv);
    }
    const sorted = [...took].sort((x, y) => x - y);
    const at = (q: number) => (sorted[Math.min(n - 1, Math.floor(q * n))] ?? 0).toFixed(3);
    const t0 = performance.now();
    for (let rv = n + 1; rv <= 2 * n; rv++) {
      sentAt.set(rv, performance.now());
      a.bus.publish({ type: "changes", rv });
    }
    await until("the burst", () => took.length === 2 * n);
    const burstMs = performance.now() - t0;
    console.log(
      `NATS bus publish→receive, ${n} messages one at a time: p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${at(1)} ms; ${n} at once: all received in ${burstMs.toFixed(1)} ms`,
    );
    expect(took).toHaveLength(2 * n);
  }, 60_000);
});
