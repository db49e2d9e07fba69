// Properties of our HTTP/2 stack (src/cri/h2-*.ts, h2.ts) under random and mutated frame
// sequences: frames of every type with their fields, flags and streams drawn at random, lengths
// lied about, bytes edited, the whole cut at random byte boundaries. Fed to a server connection
// and to a client connection directly (a socket that records what they write), each input ends
// with the connection open or closed after a GOAWAY, never with an exception out of receive();
// what a connection holds of a partial frame and of a header block stays within one frame and the
// header list limit; every stream of the client hears at most one end. Over real sockets, after
// each hostile client the gRPC server still serves a well-behaved one.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { startGrpcServer } from "../../../src/cri/grpc-server.ts";
import { H2Connection, type StreamHandler } from "../../../src/cri/h2.ts";
import { H2ServerConnection } from "../../../src/cri/h2-server.ts";
import { createH2Transport } from "../../../src/cri/transport.ts";
import { fuzz, fuzzTimeout } from "../../lib/fuzz.ts";
import {
  clientExchange,
  frameTypes,
  held,
  MAX_HEADER_LIST,
  METHOD,
  peerBytes,
  REQUEST,
  RESPONSE,
  recordingSocket,
  serverExchange,
  TRAILERS,
} from "../../lib/h2-fuzz.ts";
import {
  F,
  grpcMessage,
  PREFACE,
  type RawConn,
  rawClient,
  rawFrame,
  T,
} from "../../lib/h2-peer.ts";

const flushTurn = () => new Promise<void>((r) => queueMicrotask(r));

/** Feeds `chunks` to a new server connection (its calls answered at their end); what it wrote
 * by the end of the turn, how many calls it answered, and whether it closed. */
async function serveChunks(chunks: Buffer[]) {
  const { socket, state } = recordingSocket();
  let served = 0;
  const conn = new H2ServerConnection(socket as never, {
    windowBytes: 65_535,
    maxHeaderListBytes: MAX_HEADER_LIST,
    maxConcurrentStreams: 4,
    onStream: (s) => {
      s.onEnd = () => {
        s.respond([[":status", "200"]]);
        s.write(grpcMessage(Buffer.from("ok")));
        s.end([["grpc-status", "0"]]);
        served++;
      };
    },
  });
  for (const c of chunks) {
    conn.receive(c);
    const h = held(conn);
    expect(h.partial).toBeLessThanOrEqual(9 + 16_384);
    expect(h.block).toBeLessThanOrEqual(MAX_HEADER_LIST);
  }
  await flushTurn();
  const out = { written: Buffer.concat(state.written), served, terminated: state.terminated };
  conn.closedBySocket("the test ended");
  return out;
}

describe("HTTP/2 server connection under random and mutated frames", () => {
  test("ends open, or closed after GOAWAY; never throws; holds at most a frame and a header block; the same however the bytes are cut", async () => {
    await fuzz(
      "h2-server-frames",
      peerBytes([PREFACE, ...clientExchange], [1, 2, 3, 5, 0], [REQUEST, TRAILERS], 1),
      async (chunks) => {
        const got = await serveChunks(chunks);
        const types = frameTypes(got.written);
        if (got.terminated) expect(types.at(-1)).toBe(T.GOAWAY);
        // a served call's answer went out, unless a GOAWAY since dropped what was queued
        else expect(types.filter((t) => t === T.HEADERS).length).toBeGreaterThanOrEqual(got.served);
        expect(await serveChunks([Buffer.concat(chunks)])).toEqual(got);
      },
      { seed: 30_731, runs: 400 },
    );
  });

  test("a valid exchange dribbled in chunks of a few bytes is served as if it came whole", async () => {
    const whole = Buffer.concat([PREFACE, ...clientExchange]);
    await fuzz(
      "h2-server-dribbled",
      fc.integer({ min: 1, max: 16 }),
      async (size) => {
        const chunks: Buffer[] = [];
        for (let at = 0; at < whole.length; at += size) chunks.push(whole.subarray(at, at + size));
        const got = await serveChunks(chunks);
        expect(got.served).toBe(2);
        expect(got).toEqual(await serveChunks([whole]));
      },
      { seed: 30_735, runs: 50 },
    );
  });
});

describe("HTTP/2 server connection with a client that never reads", () => {
  test("holds at most maxQueuedBytes of answers, then says GOAWAY ENHANCE_YOUR_CALM", async () => {
    const LIMIT = 32 * 1024;
    await fuzz(
      "h2-server-unread",
      fc.tuple(
        fc.integer({ min: 1, max: 1500 }),
        fc.integer({ min: 1, max: 400 }),
        fc.boolean(),
        fc.constantFrom(0, 7),
      ),
      ([requests, perChunk, trailersOnly, taken]) => {
        // a socket that takes `taken` bytes of each write, at most (0: none)
        const state = { terminated: false, last: Buffer.alloc(0) };
        const socket = {
          write: (b: Uint8Array) => {
            state.last = Buffer.from(b);
            return Math.min(b.length, taken);
          },
          terminate: () => {
            state.terminated = true;
          },
        };
        const conn = new H2ServerConnection(socket as never, {
          windowBytes: 65_535,
          maxHeaderListBytes: MAX_HEADER_LIST,
          maxQueuedBytes: LIMIT,
          maxConcurrentStreams: 100,
          onStream: (s) => {
            s.onEnd = () => {
              const status: [string, string][] = [
                [":status", "200"],
                ["grpc-status", "12"],
              ];
              if (trailersOnly) s.respond(status, true);
              else {
                s.respond([[":status", "200"]]);
                s.write(grpcMessage(Buffer.alloc(20)));
                s.end(status.slice(1));
              }
            };
          },
        });
        conn.receive(Buffer.concat([PREFACE, rawFrame(T.SETTINGS, 0, 0)]));
        const outbox = (conn as unknown as { outbox: { bytes: number; flush(): void } }).outbox;
        for (let first = 0; first < requests && !state.terminated; first += perChunk) {
          const ids = Array.from(
            { length: Math.min(perChunk, requests - first) },
            (_, i) => 1 + 2 * (first + i),
          );
          conn.receive(
            Buffer.concat(
              ids.map((id) => rawFrame(T.HEADERS, F.END_HEADERS | F.END_STREAM, id, REQUEST)),
            ),
          );
          outbox.flush(); // what the event loop does at the end of the turn
          expect(outbox.bytes).toBeLessThanOrEqual(LIMIT);
        }
        if (state.terminated) {
          // the last write: GOAWAY alone, ENHANCE_YOUR_CALM
          expect([state.last[3], state.last.readUInt32BE(13)]).toEqual([T.GOAWAY, 0xb]);
        }
      },
      { seed: 30_734, runs: 30 },
    );
  });
});

/** Feeds `chunks` from the server to a new client connection with one call open (its socket is
 * ours; its own connect fails later, on a missing path, and it is closed before): how the call
 * ended, what the client wrote, and whether it closed. Read at once, before that connect fails:
 * the GOAWAY of a broken rule is written at once, alone, and what was queued before is dropped. */
function clientChunks(dir: string, chunks: Buffer[]) {
  const conn = new H2Connection({
    address: { unix: join(dir, "none.sock") },
    windowBytes: 65_535,
    maxHeaderListBytes: MAX_HEADER_LIST,
  });
  const { socket, state } = recordingSocket();
  (conn as unknown as { socket: unknown }).socket = socket;
  const events: string[] = [];
  let ends = 0;
  const handler: StreamHandler = {
    onHeaders: (f) => events.push(`headers ${JSON.stringify(f)}`),
    onData: (d) => events.push(`data ${d.toString("hex")}`),
    onEnd: () => events.push(`end ${++ends}`),
    onReset: (code) => events.push(`reset ${code} ${++ends}`),
    onLost: (why) => events.push(`lost ${why} ${++ends}`),
  };
  conn.request(REQUEST, grpcMessage(Buffer.from("q")), handler);
  for (const c of chunks) {
    conn.receive(c);
    const h = held(conn);
    expect(h.partial).toBeLessThanOrEqual(9 + 16_384);
    expect(h.block).toBeLessThanOrEqual(MAX_HEADER_LIST);
  }
  const { goingAway } = conn as unknown as { goingAway: boolean };
  const written = Buffer.concat(state.written);
  const out = { events, ends, written, terminated: state.terminated, goingAway };
  conn.close();
  return out;
}

describe("HTTP/2 client connection under random and mutated frames", () => {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-h2-fuzz-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test("ends open, or closed after GOAWAY with its call ended; the call ends at most once, with nothing after; the same however the bytes are cut", async () => {
    await fuzz(
      "h2-client-frames",
      peerBytes(serverExchange, [1, 3, 2, 0], [RESPONSE, TRAILERS]),
      (chunks) => {
        const got = clientChunks(dir, chunks);
        expect(got.ends).toBeLessThanOrEqual(1);
        if (got.ends === 1) expect(got.events.at(-1)).toMatch(/^(end|reset|lost) /);
        if (got.terminated) {
          // closed for a broken rule (our GOAWAY), or after the server's GOAWAY once no call was left
          if (!got.goingAway) expect(frameTypes(got.written).at(-1)).toBe(T.GOAWAY);
          expect(got.ends).toBe(1); // lost then, or ended before
        }
        expect(clientChunks(dir, [Buffer.concat(chunks)])).toEqual(got);
      },
      { seed: 30_732, runs: 400 },
    );
  });
});

describe("gRPC server over real sockets after hostile clients", () => {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-h2-fuzz-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test(
    "each hostile connection ends open or with GOAWAY, and a well-behaved client is served after it",
    async () => {
      const server = await startGrpcServer({
        socketPath: join(dir, "s.sock"),
        maxHeaderListBytes: MAX_HEADER_LIST,
        unary: { [METHOD]: (req) => Buffer.from(`ok:${req}`) },
      });
      const client = createH2Transport({
        address: { unix: server.socketPath },
        maxReceiveBytes: 1 << 20,
        windowBytes: 1 << 20,
        maxHeaderListBytes: 1 << 20,
      });
      try {
        await fuzz(
          "h2-server-sockets",
          peerBytes(clientExchange.slice(1), [1, 2, 3, 0], [REQUEST, TRAILERS]),
          async (chunks) => {
            const c: RawConn = await rawClient(server.socketPath);
            for (const chunk of chunks) {
              c.write(chunk);
              if (!(await c.flushed())) break;
            }
            // A PING after the input: its ACK says the server read everything before it (unless
            // the input ended inside a frame, which the PING then completes or extends).
            c.send(T.PING, 0, 0, Buffer.alloc(8));
            await Promise.race([
              c.frame((f) => f.type === T.PING && (f.flags & F.ACK) !== 0, 100).catch(() => {}),
              c.whenClosed,
            ]);
            if (c.closed) expect(c.goaway()).toBeDefined();
            c.close();
            expect((await client.call(METHOD, Buffer.from("sane"), 5000)).toString()).toBe(
              "ok:sane",
            );
          },
          { seed: 30_733, runs: 30 },
        );
      } finally {
        client.close();
        server.close();
      }
    },
    fuzzTimeout(60_000),
  );
});
