// A replica's relay on its bus's connection (src/hub/relay/replica.ts), through a real nats-server
// (scripts/lib/nats.ts); the bus is a stand-in that hands out a connection and calls onGap.
// NEEDS nats-server (Debian's package nats-server): without it these tests fail, saying so.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { type NatsServer, startNatsServer } from "../../../scripts/lib/nats.ts";
import { createNatsBus, type NatsBus } from "../../../src/hub/bus-nats.ts";
import { createReplicaStreams, type RelayBus } from "../../../src/hub/relay/replica.ts";
import type { StreamOpen } from "../../../src/protocol/index.ts";
import type { OpenStream, StreamOutput } from "../../../src/streams/types.ts";
import { realClock } from "../../../src/util/clock.ts";
import { createLogger } from "../../../src/util/log.ts";

let nats: NatsServer;
const conns: NatsConnection[] = [];
const log = createLogger({ level: "error", write: () => {} });

beforeAll(async () => {
  nats = await startNatsServer();
});

afterAll(async () => {
  await Promise.all(conns.map((nc) => nc.close().catch(() => {})));
  await nats?.stop();
});

async function natsConnection(name: string): Promise<NatsConnection> {
  const nc = await connect({ servers: [nats.url], name });
  conns.push(nc);
  return nc;
}

/** A bus with no connection until connect() gives it one (and runs the gap callbacks). */
function standInBus() {
  let nc: NatsConnection | undefined;
  const gaps = new Set<() => void>();
  const bus: RelayBus = {
    connection: () => nc,
    onGap: (fn) => {
      gaps.add(fn);
      return () => gaps.delete(fn);
    },
  };
  return {
    bus,
    async connect(name: string) {
      nc = await natsConnection(name);
      for (const fn of gaps) fn();
      await nc.flush();
      return nc;
    },
  };
}

const exec: StreamOpen = {
  type: "stream.open",
  id: 1,
  namespace: "default",
  pod: "web",
  window: 0,
  kind: "exec",
  command: ["true"],
  stdout: true,
};

/** A device whose exec ends at once with `code`. */
const device =
  (code: number): OpenStream =>
  async (_req, out) => {
    out.end({ exitCode: code });
    return {};
  };

/** Opens exec with `open`: its exit code, or the failure it was refused with. */
async function run(open: OpenStream): Promise<number | { code: number; message: string }> {
  const ended = Promise.withResolvers<number>();
  const out: StreamOutput = { write: async () => {}, end: (r) => ended.resolve(r.exitCode ?? -1) };
  try {
    await open(exec, out, new AbortController().signal);
  } catch (err) {
    const e = err as { code: number; message: string };
    return { code: e.code, message: e.message };
  }
  return ended.promise;
}

describe("createReplicaStreams()", () => {
  test("a node held before the bus connects is served once it does, until released", async () => {
    const holder = standInBus();
    const asker = standInBus();
    const held = createReplicaStreams(holder.bus, { clock: realClock, log });
    const other = createReplicaStreams(asker.bus, { clock: realClock, log });
    held.hold("dev-1", device(7));
    expect(await run(other.opener("dev-1"))).toMatchObject({
      code: 503,
      message: expect.stringContaining("not yet connected to NATS"),
    });
    await asker.connect("hub-b");
    expect(await run(other.opener("dev-1"))).toMatchObject({
      code: 503,
      message: 'node "dev-1" is offline: no hub replica holds it',
    });
    await holder.connect("hub-a");
    expect(await run(other.opener("dev-1"))).toBe(7);
    held.release("dev-1");
    await holder.bus.connection()?.flush(); // the unsubscribe reached the server
    expect(await run(other.opener("dev-1"))).toMatchObject({ code: 503 });
    held.hold("dev-1", device(8));
    await holder.bus.connection()?.flush();
    expect(await run(other.opener("dev-1"))).toBe(8);
    held.close();
    await holder.bus.connection()?.flush();
    expect(await run(other.opener("dev-1"))).toMatchObject({ code: 503 });
    other.close();
  });

  test("a connection the bus replaces serves every held node again", async () => {
    const holder = standInBus();
    const asker = standInBus();
    await asker.connect("hub-b");
    const first = await holder.connect("hub-a");
    const held = createReplicaStreams(holder.bus, { clock: realClock, log });
    const other = createReplicaStreams(asker.bus, { clock: realClock, log });
    held.hold("dev-2", device(2));
    held.hold("dev-3", device(3));
    await first.flush();
    expect([await run(other.opener("dev-2")), await run(other.opener("dev-3"))]).toEqual([2, 3]);
    await first.close();
    await holder.connect("hub-a");
    expect([await run(other.opener("dev-2")), await run(other.opener("dev-3"))]).toEqual([2, 3]);
    held.close();
    other.close();
  });
  test("on the replicas' NATS buses, a node no replica holds fails at once with 503", async () => {
    const buses = ["hub-a", "hub-b"].map((name) =>
      createNatsBus({ servers: [nats.url], clock: realClock, log, name }),
    );
    const [a, b] = buses as [NatsBus, NatsBus];
    await Promise.all([a.ready(), b.ready()]);
    const held = createReplicaStreams(a, { clock: realClock, log, openTimeoutMs: 20_000 });
    const other = createReplicaStreams(b, { clock: realClock, log, openTimeoutMs: 20_000 });
    held.hold("dev-4", device(4));
    await a.connection()?.flush();
    expect(await run(other.opener("dev-4"))).toBe(4);
    // Each bus listens on fleet.node.>: the open of a node held nowhere must not wait 20 s.
    expect(await run(other.opener("dev-5"))).toMatchObject({
      code: 503,
      message: 'node "dev-5" is offline: no hub replica holds it',
    });
    held.close();
    other.close();
    await Promise.all(buses.map((x) => x.close()));
  });

  test("a question about a node is answered by the replica holding it; none holds it: undefined", async () => {
    const holder = standInBus();
    const asker = standInBus();
    const held = createReplicaStreams(holder.bus, { clock: realClock, log });
    const other = createReplicaStreams(asker.bus, { clock: realClock, log });
    const history = { kind: "NodeHealth", node: "dev-6", history: [{ collectedAt: 1 }] };
    held.hold("dev-6", device(6), (q) => (q === "health" ? history : undefined));
    held.hold("dev-7", device(7)); // served for streams only
    await expect(other.ask("dev-6", "health")).rejects.toMatchObject({
      code: 503,
      message: expect.stringContaining("not yet connected to NATS"),
    });
    await asker.connect("hub-b");
    await holder.connect("hub-a");
    expect(await other.ask("dev-6", "health")).toEqual(history);
    expect(await other.ask("dev-7", "health")).toBeUndefined();
    expect(await other.ask("dev-8", "health")).toBeUndefined();
    held.release("dev-6");
    await holder.bus.connection()?.flush();
    expect(await other.ask("dev-6", "health")).toBeUndefined();
    held.close();
    other.close();
  });
});
