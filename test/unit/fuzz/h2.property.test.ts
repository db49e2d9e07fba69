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
import { encodeHeaders } from "../../../src/cri/hpack.ts";
import { createH2Transport } from "../../../src/cri/transport.ts";
import { fuzz } from "../../lib/fuzz.ts";
import {
  F,
  grpcMessage,
  PREFACE,
  type RawConn,
  rawClient,
  rawFrame,
  T,
} from "../../lib/h2-peer.ts";
import { mutated, splits } from "../../lib/wire-mutations.ts";

const MAX_HEADER_LIST = 4096;
const METHOD = "/pkg.Svc/Method";
const REQUEST = encodeHeaders([
  [":method", "POST"],
  [":scheme", "http"],
  [":path", METHOD],
  [":authority", "localhost"],
  ["content-type", "application/grpc"],
  ["te", "trailers"],
]);
const RESPONSE = encodeHeaders([
  [":status", "200"],
  ["content-type", "application/grpc"],
]);
const TRAILERS = encodeHeaders([["grpc-status", "0"]]);

/** A SETTINGS payload of any keys and values. */
const settingsEntries = fc
  .array(
    fc.tuple(
      fc.integer({ min: 0, max: 8 }),
      fc.oneof(fc.nat(), fc.integer({ min: 0, max: 2 ** 32 - 1 })),
    ),
    {
      maxLength: 3,
    },
  )
  .map((es) => {
    const p = Buffer.alloc(6 * es.length);
    es.forEach(([k, v], i) => {
      p.writeUInt16BE(k, 6 * i);
      p.writeUInt32BE(v, 6 * i + 2);
    });
    return p;
  });

/** One frame a peer may send: any type (known or not), flags, stream and payload; `lie`: a
 * length field other than the payload's. */
const anyFrame = (ids: number[], blocks: Buffer[]) =>
  fc.oneof(
    {
      weight: 3,
      arbitrary: fc.record({
        type: fc.constantFrom(T.HEADERS, T.CONTINUATION),
        flags: fc.constantFrom(
          F.END_HEADERS,
          F.END_HEADERS | F.END_STREAM,
          0,
          0x08 | 0x04,
          0x20 | 0x04,
          0xff,
        ),
        id: fc.constantFrom(...ids),
        payload: fc.constantFrom(...blocks).chain((b) => fc.oneof(fc.constant(b), mutated(b, 2))),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        type: fc.constant(T.DATA),
        flags: fc.constantFrom(0, F.END_STREAM, F.PADDED, 0xff),
        id: fc.constantFrom(...ids),
        payload: fc.oneof(
          fc.uint8Array({ maxLength: 40 }).map((m) => grpcMessage(m)),
          fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b)),
        ),
      }),
    },
    {
      weight: 4,
      arbitrary: fc.record({
        type: fc.integer({ min: 0, max: 12 }),
        flags: fc.integer({ min: 0, max: 255 }),
        id: fc.oneof(fc.constantFrom(...ids), fc.nat()),
        payload: fc.oneof(
          fc.uint8Array({ maxLength: 24 }).map((b) => Buffer.from(b)),
          settingsEntries,
        ),
      }),
    },
  );

/** A peer's bytes: `valid` (the frames of a well-behaved exchange, SETTINGS first) with up to
 * four random frames put in anywhere, some lying about their length; then, half the time, edited
 * bytes; then cut up. The first `keep` frames (a preface) stay first. */
const peerBytes = (valid: Buffer[], ids: number[], blocks: Buffer[], keep = 0) =>
  fc
    .array(
      fc.tuple(
        fc.nat(),
        anyFrame(ids, blocks),
        fc.option(fc.integer({ min: 0, max: 20_000 }), { freq: 8 }),
      ),
      { maxLength: 4 },
    )
    .chain((extra) => {
      const frames = [...valid];
      for (const [at, f, lie] of extra) {
        const i = keep + (at % (frames.length - keep + 1));
        frames.splice(i, 0, rawFrame(f.type, f.flags, f.id, f.payload, lie ?? f.payload.length));
      }
      const bytes = Buffer.concat(frames);
      return fc.oneof(fc.constant(bytes), mutated(bytes, 3)).chain(splits);
    });

/** A client's two calls, as a well-behaved client sends them. */
const clientExchange = [
  rawFrame(T.SETTINGS, 0, 0),
  rawFrame(T.HEADERS, F.END_HEADERS, 1, REQUEST),
  rawFrame(T.DATA, F.END_STREAM, 1, grpcMessage(Buffer.from("q"))),
  rawFrame(T.HEADERS, F.END_HEADERS, 3, REQUEST),
  rawFrame(T.DATA, F.END_STREAM, 3, grpcMessage(Buffer.from("r"))),
];
/** A server's answer to stream 1. */
const serverExchange = [
  rawFrame(T.SETTINGS, 0, 0),
  rawFrame(T.HEADERS, F.END_HEADERS, 1, RESPONSE),
  rawFrame(T.DATA, 0, 1, grpcMessage(Buffer.from("x"))),
  rawFrame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, TRAILERS),
];

/** A socket that takes everything written, records it, and whether it was terminated. */
function recordingSocket() {
  const state = { written: [] as Buffer[], terminated: false };
  const socket = {
    write: (b: Uint8Array) => {
      state.written.push(Buffer.from(b));
      return b.length;
    },
    terminate: () => {
      state.terminated = true;
    },
    unref: () => {},
  };
  return { socket, state };
}

/** The frames in `bytes` (a client's preface skipped): their types. */
function frameTypes(bytes: Buffer): number[] {
  let b = bytes.subarray(0, PREFACE.length).equals(PREFACE)
    ? bytes.subarray(PREFACE.length)
    : bytes;
  const types: number[] = [];
  while (b.length >= 9) {
    const len = b.readUIntBE(0, 3);
    expect(b.length).toBeGreaterThanOrEqual(9 + len); // whole frames only
    types.push(b[3] as number);
    b = b.subarray(9 + len);
  }
  expect(b.length).toBe(0);
  return types;
}

/** What a session holds of the peer's input: a partial frame, and an open header block. */
function held(session: object): { partial: number; block: number } {
  const s = session as {
    received: { held: number };
    headerBlocks: { partial?: { bytes: number } };
  };
  return { partial: s.received.held, block: s.headerBlocks.partial?.bytes ?? 0 };
}

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
  const out = { events, ends, written: Buffer.concat(state.written), terminated: state.terminated };
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
          expect(frameTypes(got.written).at(-1)).toBe(T.GOAWAY);
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

  test("each hostile connection ends open or with GOAWAY, and a well-behaved client is served after it", async () => {
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
          expect((await client.call(METHOD, Buffer.from("sane"), 5000)).toString()).toBe("ok:sane");
        },
        { seed: 30_733, runs: 30 },
      );
    } finally {
      client.close();
      server.close();
    }
  }, 60_000);
});
