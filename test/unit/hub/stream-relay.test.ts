// Streams relayed between two hub replicas through a real nats-server (scripts/lib/nats.ts): each
// "replica" is a NATS connection of its own with a relay on it, in this one process.
// NEEDS nats-server (Debian's package nats-server): without it these tests fail, saying so.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash, randomBytes } from "node:crypto";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { type NatsServer, startNatsServer } from "../../../scripts/lib/nats.ts";
import { openSubject } from "../../../src/hub/relay/codec.ts";
import { createStreamRelay, type StreamRelay } from "../../../src/hub/relay/index.ts";
import type { StreamError, StreamOpen } from "../../../src/protocol/index.ts";
import { type OpenStream, StreamFailure, type StreamOutput } from "../../../src/streams/types.ts";
import { realClock } from "../../../src/util/clock.ts";
import { createLogger } from "../../../src/util/log.ts";
import { until } from "../../lib/until.ts";

let nats: NatsServer;
const conns: NatsConnection[] = [];
const MiB = 1024 * 1024;

beforeAll(async () => {
  nats = await startNatsServer();
});

afterAll(async () => {
  await Promise.all(conns.map((nc) => nc.close().catch(() => {})));
  await nats?.stop();
});

/** A replica: its own connection and relay (short timings: a silent peer fails in 1.5 s). */
async function replica(name: string) {
  const nc = await connect({ servers: [nats.url], name });
  conns.push(nc);
  const log = createLogger({ level: "error", write: () => {} });
  const relay = createStreamRelay({
    nc,
    clock: realClock,
    log,
    keepaliveMs: 100,
    silenceMs: 1_500,
    openTimeoutMs: 3_000,
  });
  return { nc, relay };
}

const open = (kind: "exec" | "logs" | "portforward"): StreamOpen => {
  const target = {
    type: "stream.open",
    id: 1,
    namespace: "default",
    pod: "web",
    window: 0,
  } as const;
  if (kind === "exec") return { ...target, kind, command: ["cat"], stdin: true, stdout: true };
  if (kind === "logs") return { ...target, kind, follow: true };
  return { ...target, kind, port: 8080 };
};

/** A client's end: what arrived, its hash, and a gate that holds each write while closed. */
function client() {
  const hash = createHash("sha256");
  const got: string[] = [];
  const c = {
    bytes: 0,
    gate: undefined as Promise<void> | undefined,
    ended: Promise.withResolvers<{ exitCode?: number; error?: StreamError }>(),
    got,
    digest: () => hash.digest("hex"),
  };
  const out: StreamOutput = {
    write: async (_ch, data) => {
      c.bytes += data.length;
      hash.update(data);
      got.push(new TextDecoder().decode(data));
      await c.gate;
    },
    end: (r) => c.ended.resolve(r),
  };
  return {
    ...c,
    out,
    get state() {
      return c;
    },
  };
}

/** A device that echoes its input (exec: on stdout) and ends with 0 at the end of input. */
function echoDevice() {
  const signals: AbortSignal[] = [];
  const open: OpenStream = async (req, out, signal) => {
    signals.push(signal);
    const ch = req.kind === "portforward" ? 0 : 1;
    return { input: (_c, d) => out.write(ch, d), eof: () => out.end({ exitCode: 0 }) };
  };
  return { open, signals };
}

/** A device whose logs are `data`, written in pieces of 100 KiB; counts what it has written. */
function logDevice(data: Uint8Array) {
  const d = { written: 0, signals: [] as AbortSignal[] };
  const open: OpenStream = async (_req, out, signal) => {
    d.signals.push(signal);
    void (async () => {
      for (let at = 0; at < data.length && !signal.aborted; at += 100 * 1024) {
        const piece = data.subarray(at, at + 100 * 1024);
        await out.write(1, piece);
        d.written += piece.length;
      }
      out.end({ exitCode: 0 });
    })();
    return {};
  };
  return { ...d, open, state: d };
}

function expectIdle(...relays: StreamRelay[]) {
  for (const r of relays) expect([r.stats().subscriptions, r.stats().timers]).toEqual([0, 0]);
}

describe("createStreamRelay()", () => {
  test("carries bytes both ways in order, and the end, then holds nothing", async () => {
    const a = await replica("hub-a");
    const b = await replica("hub-b");
    const dev = echoDevice();
    const stop = b.relay.serve("cam.site-1", dev.open);
    await b.nc.flush();
    const c = client();
    const work = await a.relay.opener("cam.site-1")(
      open("exec"),
      c.out,
      new AbortController().signal,
    );
    const sent: string[] = [];
    for (let i = 0; i < 200; i++) {
      sent.push(`line ${i}\n`);
      await work.input?.(0, new TextEncoder().encode(`line ${i}\n`));
    }
    work.eof?.();
    expect(await c.ended.promise).toEqual({ exitCode: 0 });
    expect(c.got.join("")).toBe(sent.join(""));
    await until("both ends closed", () => b.relay.stats().subscriptions === 0);
    expectIdle(a.relay, b.relay);
    expect([a.relay.stats().malformed, b.relay.stats().malformed]).toEqual([0, 0]);
    stop();
  });

  test("a transfer of 24 MiB each way arrives intact", async () => {
    const a = await replica("hub-a");
    const b = await replica("hub-b");
    const stop = b.relay.serve("dev-2", echoDevice().open);
    await b.nc.flush();
    const c = client();
    const work = await a.relay.opener("dev-2")(
      open("portforward"),
      c.out,
      new AbortController().signal,
    );
    const data = randomBytes(24 * MiB);
    const pieces = [];
    for (let at = 0; at < data.length; at += 700 * 1024)
      pieces.push(work.input?.(0, data.subarray(at, at + 700 * 1024)));
    await Promise.all(pieces);
    work.eof?.();
    await c.ended.promise;
    expect(c.state.bytes).toBe(data.length);
    expect(c.digest()).toBe(createHash("sha256").update(data).digest("hex"));
    stop();
  });

  test("a slow reader holds the writer at its credit (2 MiB), then gets everything", async () => {
    const a = await replica("hub-a");
    const b = await replica("hub-b");
    const data = randomBytes(16 * MiB);
    const dev = logDevice(data);
    const stop = b.relay.serve("dev-3", dev.open);
    await b.nc.flush();
    const c = client();
    const release = Promise.withResolvers<void>();
    c.state.gate = release.promise;
    await a.relay.opener("dev-3")(open("logs"), c.out, new AbortController().signal);
    await until("the reader's credit is used", () => c.state.bytes >= 2 * MiB);
    // Two round trips through the server on each connection: whatever was sent has arrived.
    for (let i = 0; i < 2; i++) await Promise.all([b.nc.flush(), a.nc.flush()]);
    expect(c.state.bytes).toBe(2 * MiB);
    // The device's write in progress is the only one past the credit.
    expect(dev.state.written).toBeLessThanOrEqual(2 * MiB);
    release.resolve();
    c.state.gate = undefined;
    expect(await c.ended.promise).toEqual({ exitCode: 0 });
    expect(c.digest()).toBe(createHash("sha256").update(data).digest("hex"));
    stop();
  });

  test("a stream its device ends as it opens reaches the requester's end", async () => {
    const a = await replica("hub-a");
    const b = await replica("hub-b");
    const stop = b.relay.serve("dev-9", async (_req, out) => {
      out.end({ exitCode: 3 });
      return {};
    });
    await b.nc.flush();
    const c = client();
    await a.relay.opener("dev-9")(open("logs"), c.out, new AbortController().signal);
    expect(await c.ended.promise).toEqual({ exitCode: 3 });
    await until("the holder's end closed", () => b.relay.stats().subscriptions === 0);
    expectIdle(a.relay, b.relay);
    stop();
  });

  test("a refusal reaches the requester with its status, reason and message", async () => {
    const a = await replica("hub-a");
    const b = await replica("hub-b");
    const stop = b.relay.serve("dev-4", async () => {
      throw new StreamFailure(404, "NotFound", 'pod "default/web" is not on node "dev-4"');
    });
    await b.nc.flush();
    const c = client();
    const opening = a.relay.opener("dev-4")(open("exec"), c.out, new AbortController().signal);
    await expect(opening).rejects.toMatchObject({
      code: 404,
      reason: "NotFound",
      message: 'pod "default/web" is not on node "dev-4"',
    });
    const nobody = a.relay.opener("dev-5")(open("exec"), c.out, new AbortController().signal);
    await expect(nobody).rejects.toMatchObject({ code: 503, reason: "ServiceUnavailable" });
    expect(b.relay.stats().refused).toBe(1);
    expectIdle(a.relay, b.relay);
    stop();
  });

  test("a malformed open is refused and counted; malformed stream messages are dropped", async () => {
    const a = await replica("hub-a");
    const b = await replica("hub-b");
    const spy = await replica("spy");
    const ids: string[] = [];
    spy.nc.subscribe("fleet.stream.*.in", { callback: (_e, m) => void ids.push(m.subject) });
    await spy.nc.flush();
    const stop = b.relay.serve("dev-6", echoDevice().open);
    await b.nc.flush();
    const answer = await a.nc.request(openSubject("dev-6"), '{"req":{"kind":"exec"}}', {
      timeout: 3_000,
    });
    expect(JSON.parse(answer.string())).toMatchObject({ ok: false, error: { code: 400 } });
    expect(b.relay.stats().malformed).toBe(1);
    const c = client();
    const work = await a.relay.opener("dev-6")(open("exec"), c.out, new AbortController().signal);
    await until("the stream's subject is seen", () => ids.length > 0);
    const out = (ids[0] as string).replace(/\.in$/, ".out");
    for (const junk of [new Uint8Array([9, 0, 0, 0, 0]), new Uint8Array([2, 0, 0, 0, 0, 123])])
      spy.nc.publish(out, junk);
    await spy.nc.flush();
    await until("both are counted", () => a.relay.stats().malformed === 2);
    // stdout carries nothing to the device: the holder drops it.
    await work.input?.(1, new TextEncoder().encode("to stdout"));
    await until("the wrong channel is counted", () => b.relay.stats().malformed === 2);
    await work.input?.(0, new TextEncoder().encode("still here"));
    work.eof?.();
    expect(await c.ended.promise).toEqual({ exitCode: 0 });
    expect(c.got.join("")).toBe("still here");
    stop();
  });

  test("the holder vanishing mid-stream ends the requester's stream with an error", async () => {
    const a = await replica("hub-a");
    const b = await replica("hub-b");
    const stop = b.relay.serve("dev-7", echoDevice().open);
    await b.nc.flush();
    const c = client();
    const work = await a.relay.opener("dev-7")(open("exec"), c.out, new AbortController().signal);
    await work.input?.(0, new TextEncoder().encode("before"));
    await until("the echo", () => c.got.join("") === "before");
    stop();
    await b.nc.close();
    const r = await c.ended.promise;
    expect(r.error).toMatchObject({ code: 504, reason: "Timeout" });
    expectIdle(a.relay);
  });

  test("the requester closing ends the holder's side; the requester vanishing too", async () => {
    const a = await replica("hub-a");
    const b = await replica("hub-b");
    const dev = echoDevice();
    const stop = b.relay.serve("dev-8", dev.open);
    await b.nc.flush();
    const client1 = new AbortController();
    await a.relay.opener("dev-8")(open("exec"), client().out, client1.signal);
    client1.abort();
    await until("the holder's work is aborted", () => dev.signals[0]?.aborted === true);
    expectIdle(a.relay, b.relay);
    const gone = await replica("hub-gone");
    await gone.relay.opener("dev-8")(open("exec"), client().out, new AbortController().signal);
    await gone.nc.close();
    await until("the holder hears silence", () => dev.signals[1]?.aborted === true);
    expectIdle(b.relay);
    stop();
  });
  test("a node served by two replicas at once: each open reaches one of them", async () => {
    const a = await replica("hub-a");
    const b = await replica("hub-b");
    const c2 = await replica("hub-c");
    const old = echoDevice();
    const now = echoDevice();
    const stops = [b.relay.serve("dev-10", old.open), c2.relay.serve("dev-10", now.open)];
    await Promise.all([b.nc.flush(), c2.nc.flush()]);
    for (let i = 0; i < 10; i++) {
      const c = client();
      const work = await a.relay.opener("dev-10")(
        open("exec"),
        c.out,
        new AbortController().signal,
      );
      work.eof?.();
      expect(await c.ended.promise).toEqual({ exitCode: 0 });
    }
    expect(old.signals.length + now.signals.length).toBe(10);
    for (const stop of stops) stop();
  });
});
