// Our gRPC server (the base of the device-plugin server) against hostile clients speaking raw
// HTTP/2 frames (test/lib/h2-peer.ts): each attack ends as RFC 9113 and the server's limits say
// (GOAWAY with the broken rule's code and the connection closed, or only the call or the streams
// past the limit refused), and afterwards a well-behaved client on a new connection still gets
// its answers from the same server: nothing the attacker sent takes the server down.
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GrpcStatus } from "../../../src/cri/errors.ts";
import { type GrpcServerOptions, startGrpcServer } from "../../../src/cri/grpc-server.ts";
import { decodeGrpcMessage } from "../../../src/cri/grpc-wire.ts";
import { RESET_BUDGET } from "../../../src/cri/h2-server.ts";
import { encodeHeaders, HpackDecoder } from "../../../src/cri/hpack.ts";
import { createH2Transport } from "../../../src/cri/transport.ts";
import {
  F,
  grpcMessage,
  type RawConn,
  type RawFrame,
  rawClient,
  rawFrame,
  sendData,
  T,
  u32,
} from "../../lib/h2-peer.ts";

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});

const METHOD = "/pkg.Svc/Method";
const REQUEST_HEADERS: [string, string][] = [
  [":method", "POST"],
  [":scheme", "http"],
  [":path", METHOD],
  [":authority", "localhost"],
  ["content-type", "application/grpc"],
  ["te", "trailers"],
];
/** The request header block (literals only: the same bytes on every stream). */
const REQUEST_BLOCK = encodeHeaders(REQUEST_HEADERS);

const GOAWAY = {
  PROTOCOL_ERROR: 0x1,
  FLOW_CONTROL_ERROR: 0x3,
  FRAME_SIZE_ERROR: 0x6,
  COMPRESSION_ERROR: 0x9,
  ENHANCE_YOUR_CALM: 0xb,
};
const REFUSED_STREAM = 0x7;
const CANCEL = 0x8;

/** A server whose one method answers "ok:" and the request, and records each request. */
async function server(opts: Partial<GrpcServerOptions> = {}) {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-grpc-hostile-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const requests: string[] = [];
  const errors: unknown[] = [];
  const s = await startGrpcServer({
    socketPath: join(dir, "s.sock"),
    unary: {
      [METHOD]: (req) => {
        requests.push(req.toString());
        return Buffer.from(`ok:${req}`);
      },
    },
    onError: (_path, err) => errors.push(err),
    ...opts,
  });
  cleanups.push(() => s.close());
  return { path: s.socketPath, requests, errors };
}

/** A hostile client on the server's socket (its preface and empty SETTINGS sent). */
async function attacker(path: string): Promise<RawConn> {
  const c = await rawClient(path);
  cleanups.push(() => c.close());
  return c;
}

/** A well-behaved client gets its answer from the server at `path`, on a new connection. */
async function stillServes(path: string): Promise<void> {
  const t = createH2Transport({
    address: { unix: path },
    maxReceiveBytes: 1 << 20,
    windowBytes: 1 << 20,
    maxHeaderListBytes: 1 << 20,
  });
  cleanups.push(() => t.close());
  expect((await t.call(METHOD, Buffer.from("sane"), 5000)).toString()).toBe("ok:sane");
}

/** The connection closed by the server, which said GOAWAY first: its code and last stream. */
async function goawayOf(c: RawConn): Promise<{ lastId: number; code: number }> {
  await c.whenClosed;
  const g = c.goaway();
  if (g === undefined) throw new Error("the server closed the connection without GOAWAY");
  return g;
}

/** Writes `make()` in batches until the connection closes (the server gave up on us). */
async function forever(c: RawConn, make: () => Buffer, perBatch = 64): Promise<void> {
  while (!c.closed) {
    for (let i = 0; i < perBatch; i++) c.write(make());
    if (!(await c.flushed())) return;
    await Bun.sleep(1);
  }
}

/** Each frame's RST_STREAM code, by stream. */
function resets(c: RawConn): Map<number, number> {
  const out = new Map<number, number>();
  for (const f of c.frames) {
    if (f.type === T.RST_STREAM) out.set(f.id, f.payload.readUInt32BE(0));
  }
  return out;
}

/** The header fields of a server's HEADERS frame (decoded in order, as the server sent them). */
function fieldsOf(decoder: HpackDecoder, f: RawFrame): Map<string, string> {
  return new Map(decoder.decode(f.payload));
}

describe("gRPC server against hostile clients", () => {
  test("an endless header block: GOAWAY ENHANCE_YOUR_CALM, the connection closed", async () => {
    const s = await server();
    const c = await attacker(s.path);
    c.send(T.HEADERS, 0, 1, REQUEST_BLOCK); // no END_HEADERS
    const junk = Buffer.alloc(16_384, 0x61);
    await forever(c, () => rawFrame(T.CONTINUATION, 0, 1, junk));
    expect((await goawayOf(c)).code).toBe(GOAWAY.ENHANCE_YOUR_CALM);
    expect(s.requests).toEqual([]);
    await stillServes(s.path);
  });

  test("a HEADERS frame over 16 KiB: GOAWAY FRAME_SIZE_ERROR", async () => {
    const s = await server();
    const c = await attacker(s.path);
    const block = Buffer.concat([REQUEST_BLOCK, Buffer.alloc(20_000, 0x61)]);
    c.send(T.HEADERS, F.END_HEADERS, 1, block);
    expect((await goawayOf(c)).code).toBe(GOAWAY.FRAME_SIZE_ERROR);
    await stillServes(s.path);
  });

  test("SETTINGS out of range (MAX_FRAME_SIZE 1): GOAWAY PROTOCOL_ERROR", async () => {
    const s = await server();
    const c = await attacker(s.path);
    c.settings([[5, 1]]);
    expect((await goawayOf(c)).code).toBe(GOAWAY.PROTOCOL_ERROR);
    await stillServes(s.path);
  });

  test("a connection window past 2^31-1: GOAWAY FLOW_CONTROL_ERROR", async () => {
    const s = await server();
    const c = await attacker(s.path);
    c.send(T.WINDOW_UPDATE, 0, 0, u32(0x7fffffff));
    c.send(T.WINDOW_UPDATE, 0, 0, u32(0x7fffffff));
    expect((await goawayOf(c)).code).toBe(GOAWAY.FLOW_CONTROL_ERROR);
    await stillServes(s.path);
  });

  test("endless DATA on one call: the call ends INTERNAL at its second message, without waiting for the client's end", async () => {
    const s = await server();
    const c = await attacker(s.path);
    c.headers(1, REQUEST_HEADERS); // no END_STREAM
    const message = grpcMessage(Buffer.from([0x08, 0x01]));
    const chunk = Buffer.concat(Array(2000).fill(message)); // 14,000 bytes of messages
    const answered = () => c.frames.some((f) => f.type === T.HEADERS && f.id === 1);
    // within the server's windows, never with END_STREAM, until the server answers
    for (let sent = 0; !answered() && !c.closed; sent++) {
      if (sent >= 300) throw new Error("no answer after 4 MB of messages");
      await sendData(c, 1, chunk);
      await Bun.sleep(1); // lets the server's answer in
    }
    const answer = await c.frame((f) => f.type === T.HEADERS && f.id === 1);
    expect(answer.flags & F.END_STREAM).toBe(F.END_STREAM); // trailers-only: the call ended
    const fields = fieldsOf(new HpackDecoder(), answer);
    expect(fields.get(":status")).toBe("200");
    expect(fields.get("grpc-status")).toBe(String(GrpcStatus.INTERNAL));
    expect(decodeGrpcMessage(fields.get("grpc-message"))).toBe(
      "a call takes exactly one request message",
    );
    expect(s.requests).toEqual([]); // the handler never ran
    expect(c.goaway()).toBeUndefined();
    // the answer is complete, so the server tells the client to stop sending (RFC 9113 8.1)
    const reset = await c.frame((f) => f.type === T.RST_STREAM && f.id === 1);
    expect(reset.payload.readUInt32BE(0)).toBe(0); // NO_ERROR
    expect(c.frames.indexOf(reset)).toBeGreaterThan(c.frames.indexOf(answer));
    await stillServes(s.path);
  });

  test("a stream storm: streams past 100 are refused with RST_STREAM REFUSED_STREAM, the first 100 reach the handler", async () => {
    const s = await server();
    const c = await attacker(s.path);
    const ids = Array.from({ length: 1000 }, (_, i) => 2 * i + 1);
    for (const id of ids) c.send(T.HEADERS, F.END_HEADERS, id, REQUEST_BLOCK); // no END_STREAM
    await c.frame((f) => f.type === T.RST_STREAM && f.id === 1999);
    const first = ids.slice(0, 100);
    const refused = resets(c);
    expect([...refused.keys()]).toEqual(ids.slice(100));
    expect(new Set(refused.values())).toEqual(new Set([REFUSED_STREAM]));
    // the first 100 are open: each request ends, reaches the handler and is answered
    for (const id of first) await sendData(c, id, grpcMessage(Buffer.from(String(id))), true);
    const decoder = new HpackDecoder();
    const statuses = new Map<number, string | undefined>();
    await c.frame((f) => {
      if (f.type === T.HEADERS) {
        const fields = fieldsOf(decoder, f);
        if (fields.has("grpc-status")) statuses.set(f.id, fields.get("grpc-status"));
      }
      return statuses.size === first.length;
    });
    expect([...statuses.keys()].sort((a, b) => a - b)).toEqual(first);
    expect(new Set(statuses.values())).toEqual(new Set(["0"]));
    expect(s.requests.map(Number).sort((a, b) => a - b)).toEqual(first);
    expect(c.goaway()).toBeUndefined();
    await stillServes(s.path);
  });

  test(`a rapid reset: GOAWAY ENHANCE_YOUR_CALM once more than ${RESET_BUDGET} streams were reset`, async () => {
    const s = await server();
    const c = await attacker(s.path);
    for (let i = 0; i < 300; i++) {
      const id = 2 * i + 1;
      c.send(T.HEADERS, F.END_HEADERS, id, REQUEST_BLOCK);
      c.send(T.RST_STREAM, 0, id, u32(CANCEL));
    }
    const g = await goawayOf(c);
    expect(g.code).toBe(GOAWAY.ENHANCE_YOUR_CALM);
    expect(g.lastId).toBe(2 * RESET_BUDGET + 1); // the stream of the 201st reset
    expect(s.requests).toEqual([]);
    await stillServes(s.path);
  });

  test("a header block whose decoded size is over the 1 MiB limit: GOAWAY", async () => {
    const s = await server();
    const c = await attacker(s.path);
    // a literal with incremental indexing (a 4,000-byte value, a 4,037-byte table entry), then
    // that entry named 300 times: 4 KB on the wire, 1.2 MB decoded
    const name = Buffer.from("x-big");
    const add = Buffer.concat([
      Buffer.from([0x40, name.length]),
      name,
      Buffer.from([0x7f, 0x80 | (4000 - 127 - 128 * 30), 30]), // 4000, 7-bit prefix
      Buffer.alloc(4000, 0x62),
    ]);
    const block = Buffer.concat([REQUEST_BLOCK, add, Buffer.alloc(300, 0xbe)]); // index 62
    expect(block.length).toBeLessThan(16_384);
    c.send(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, block);
    expect((await goawayOf(c)).code).toBe(GOAWAY.COMPRESSION_ERROR);
    expect(s.requests).toEqual([]);
    await stillServes(s.path);
  });

  test("a header block over a small maxHeaderListBytes: GOAWAY, and requests within it are served", async () => {
    const s = await server({ maxHeaderListBytes: 4096 });
    const c = await attacker(s.path);
    const big: [string, string][] = [...REQUEST_HEADERS, ["x-pad", "p".repeat(5000)]];
    c.headers(1, big, F.END_HEADERS | F.END_STREAM);
    expect((await goawayOf(c)).code).toBe(GOAWAY.ENHANCE_YOUR_CALM);
    expect(s.requests).toEqual([]);
    await stillServes(s.path);
  });
});
