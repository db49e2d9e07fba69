// Our HTTP/2 client against hostile servers speaking raw frames (test/lib/h2-peer.ts): each
// attack ends the call at once with an error naming what the server did, the connection is
// closed, and nothing the server sends is kept beyond the limits the call was given. The same
// peers run against the compiled agent's gRPC probes in test/e2e/probe-hostile.test.ts.
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCriClient } from "../../../src/cri/client.ts";
import { CriError, GrpcStatus } from "../../../src/cri/errors.ts";
import { MAX_QUEUED_REPLIES } from "../../../src/cri/h2-outbox.ts";
import { H2ServerConnection } from "../../../src/cri/h2-server.ts";
import { encodeHeaders } from "../../../src/cri/hpack.ts";
import { createH2Transport } from "../../../src/cri/transport.ts";
import { ATTACKS } from "../../lib/h2-attacks.ts";
import {
  callFailure,
  F,
  PREFACE,
  type RawConn,
  rawFrame,
  rawServer,
  settingsPayload,
  T,
  u32,
} from "../../lib/h2-peer.ts";
import { eventually } from "../../lib/testbed.ts";

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

function socketPath(): string {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-h2-hostile-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, "peer.sock");
}

function serve(path: string, handler: (c: RawConn) => Promise<void>) {
  const server = rawServer({ unix: path }, handler);
  cleanups.push(() => server.stop());
  return server;
}

/** A transport with a gRPC probe's limits. */
function probeTransport(path: string) {
  const t = createH2Transport({
    address: { unix: path },
    maxReceiveBytes: 64 * 1024,
    windowBytes: 64 * 1024,
    maxHeaderListBytes: 16 * 1024,
  });
  cleanups.push(() => t.close());
  return t;
}

const failure = callFailure;

describe("HTTP/2 client against hostile servers", () => {
  for (const attack of ATTACKS) {
    test(`${attack.name}: the call fails at once with the reason, its stream or connection closed`, async () => {
      const path = socketPath();
      const server = serve(path, (c) => attack.serve(c));
      const err = await failure(probeTransport(path).call("/x/Y", Buffer.alloc(0), 10_000));
      expect(err.code).not.toBe(GrpcStatus.DEADLINE_EXCEEDED);
      expect(err.details).toMatch(attack.reason(16 * 1024));
      const conn = server.connections[0] as RawConn;
      if (attack.breaksConnection) await conn.whenClosed;
      else await conn.frame((f) => f.type === T.RST_STREAM && f.payload.readUInt32BE(0) === 0x8);
    });
  }

  test("a rule broken after the server's SETTINGS is INTERNAL with GOAWAY and its code; before them, UNAVAILABLE", async () => {
    const path = socketPath();
    const server = serve(
      path,
      (c) => ATTACKS.find((a) => a.name === "window-overflow")?.serve(c) as Promise<void>,
    );
    const err = await failure(probeTransport(path).call("/x/Y", Buffer.alloc(0), 5000));
    expect(err.code).toBe(GrpcStatus.INTERNAL);
    const conn = server.connections[0] as RawConn;
    await conn.whenClosed;
    expect(conn.goaway()?.code).toBe(0x3); // FLOW_CONTROL_ERROR
    const path2 = socketPath();
    serve(path2, async (c) => {
      c.headers(1, [[":status", "200"]]); // no SETTINGS first
      await c.whenClosed;
    });
    const early = await failure(probeTransport(path2).call("/x/Y", Buffer.alloc(0), 5000));
    expect(early.code).toBe(GrpcStatus.UNAVAILABLE);
    expect(early.details).toContain("the server did not start with SETTINGS");
  });

  test("a header block that names a large table entry many times is refused by its decoded size", async () => {
    const path = socketPath();
    serve(path, async (c) => {
      c.settings();
      const id = (await c.request()).id;
      // one literal with incremental indexing (a 4,000-byte value), then that entry 8 times:
      // 4 KB on the wire, 32 KB decoded
      const name = Buffer.from("x-big");
      const value = Buffer.alloc(4000, 0x62);
      const add = Buffer.concat([
        Buffer.from([0x40, name.length]),
        name,
        Buffer.from([0x7f, 0x80 | (4000 - 127 - 128 * 30), 30]), // 4000, 7-bit prefix
        value,
      ]);
      const block = Buffer.concat([Buffer.from([0x88]), add, Buffer.alloc(8, 0xbe)]); // index 62
      c.send(T.HEADERS, F.END_HEADERS, id, block);
      await c.whenClosed;
    });
    const err = await failure(probeTransport(path).call("/x/Y", Buffer.alloc(0), 5000));
    expect(err.details).toContain("a header list larger than the limit of 16384 bytes");
  });

  test("requests past the server's SETTINGS_MAX_CONCURRENT_STREAMS wait for a stream to end", async () => {
    const path = socketPath();
    let conn: RawConn | undefined;
    serve(path, async (c) => {
      conn = c;
      c.settings([[3, 1]]); // one stream at a time
      await c.whenClosed;
    });
    const t = probeTransport(path);
    const calls = [t.call("/x/Y", Buffer.alloc(0), 5000)];
    const c = await eventually("the raw peer's connection", () => conn, 5000, 5);
    const first = await c.request(); // the SETTINGS came before it
    calls.push(t.call("/x/Y", Buffer.alloc(0), 5000), t.call("/x/Y", Buffer.alloc(0), 5000));
    await Bun.sleep(100);
    expect(c.frames.filter((f) => f.type === T.HEADERS)).toHaveLength(1);
    c.answer(first.id, Buffer.from("a"));
    const second = await c.frame((f) => f.type === T.HEADERS && f.id > first.id);
    await Bun.sleep(50);
    expect(c.frames.filter((f) => f.type === T.HEADERS)).toHaveLength(2);
    c.answer(second.id, Buffer.from("b"));
    const third = await c.frame((f) => f.type === T.HEADERS && f.id > second.id);
    c.answer(third.id, Buffer.from("c"));
    expect((await Promise.all(calls)).map(String)).toEqual(["a", "b", "c"]);
  });

  test("a waiting request cancelled by its caller is never sent", async () => {
    const path = socketPath();
    let conn: RawConn | undefined;
    serve(path, async (c) => {
      conn = c;
      c.settings([[3, 1]]);
      await c.whenClosed;
    });
    const t = probeTransport(path);
    const first = t.call("/x/Y", Buffer.alloc(0), 5000);
    const c = await eventually("the raw peer's connection", () => conn, 5000, 5);
    const req = await c.request();
    const abort = new AbortController();
    const second = failure(t.call("/x/Z", Buffer.alloc(0), 5000, abort.signal));
    abort.abort();
    expect((await second).code).toBe(GrpcStatus.CANCELLED);
    c.answer(req.id, Buffer.from("a"));
    await first;
    await Bun.sleep(50);
    expect(c.frames.filter((f) => f.type === T.HEADERS)).toHaveLength(1);
  });

  test("the CRI client refuses each hostile runtime with an error naming it, and works once the runtime is sane", async () => {
    for (const attack of ATTACKS) {
      const path = socketPath();
      const server = serve(path, (c) => attack.serve(c));
      const client = createCriClient({ endpoint: `unix://${path}`, defaultTimeoutMs: 10_000 });
      cleanups.push(() => client.close());
      const err = await client.version({}).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(CriError);
      expect((err as CriError).message).toMatch(attack.reason(1 << 20));
      server.stop();
    }
  });
});

describe("HTTP/2 session limits", () => {
  /** A server connection on a socket that takes nothing (the client never reads). */
  function stuckServer() {
    const state = { terminated: false };
    const socket = { write: () => 0, terminate: () => (state.terminated = true) };
    const conn = new H2ServerConnection(socket as never, {
      windowBytes: 1 << 20,
      maxHeaderListBytes: 16 * 1024,
      maxConcurrentStreams: 100,
      onStream: () => {},
    });
    conn.receive(Buffer.concat([PREFACE, rawFrame(T.SETTINGS, 0, 0, settingsPayload([]))]));
    return { conn, state };
  }

  test("a peer that sends PINGs and never reads the acknowledgements is cut off", () => {
    const { conn, state } = stuckServer();
    const ping = rawFrame(T.PING, 0, 0, Buffer.alloc(8));
    conn.receive(Buffer.concat(Array(MAX_QUEUED_REPLIES - 10).fill(ping)));
    expect(state.terminated).toBe(false);
    conn.receive(Buffer.concat(Array(20).fill(ping)));
    expect(state.terminated).toBe(true);
  });

  test("SETTINGS values out of range close the connection", () => {
    const cases: [number, number][] = [
      [4, 0x80000000], // INITIAL_WINDOW_SIZE above 2^31-1
      [5, 16_383], // MAX_FRAME_SIZE below 16384
      [5, 0x1000000], // MAX_FRAME_SIZE above 2^24-1
      [2, 2], // ENABLE_PUSH neither 0 nor 1
    ];
    for (const entry of cases) {
      const { conn, state } = stuckServer();
      conn.receive(rawFrame(T.SETTINGS, 0, 0, settingsPayload([entry])));
      expect(state.terminated).toBe(true);
    }
    const { conn, state } = stuckServer();
    conn.receive(rawFrame(T.SETTINGS, 0, 0, Buffer.alloc(7)));
    expect(state.terminated).toBe(true);
  });

  test("frames that break RFC 9113's size and stream rules close the connection", () => {
    const block = encodeHeaders([[":method", "POST"]]);
    const broken = [
      rawFrame(T.PING, 0, 0, Buffer.alloc(7)),
      rawFrame(T.PING, 0, 1, Buffer.alloc(8)),
      rawFrame(T.WINDOW_UPDATE, 0, 0, u32(0)),
      rawFrame(T.WINDOW_UPDATE, 0, 0, Buffer.alloc(3)),
      rawFrame(T.RST_STREAM, 0, 1, Buffer.alloc(4)), // stream 1 was never opened
      rawFrame(T.DATA, 0, 0, Buffer.alloc(1)),
      rawFrame(T.HEADERS, F.END_HEADERS, 2, block), // a client's stream is odd
      rawFrame(T.PRIORITY, 0, 1, Buffer.alloc(4)),
      rawFrame(T.GOAWAY, 0, 0, Buffer.alloc(4)),
      rawFrame(T.HEADERS, F.PADDED | F.END_HEADERS, 1, Buffer.from([9, 1])),
    ];
    for (const f of broken) {
      const { conn, state } = stuckServer();
      conn.receive(f);
      expect(state.terminated).toBe(true);
    }
  });
});
