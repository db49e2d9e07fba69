// Frames of hostile HTTP/2 peers for the property tests (test/unit/fuzz/h2.property.test.ts):
// well-behaved exchanges of a gRPC client and server with random frames put in, lengths lied
// about, bytes edited and cut; a socket that records what a connection writes; and what a
// connection holds of its peer's input.
import { expect } from "bun:test";
import fc from "fast-check";
import { encodeHeaders } from "../../src/cri/hpack.ts";
import { F, grpcMessage, PREFACE, rawFrame, T } from "./h2-peer.ts";
import { mutated, splits } from "./wire-mutations.ts";

export const MAX_HEADER_LIST = 4096;
export const METHOD = "/pkg.Svc/Method";
export const REQUEST = encodeHeaders([
  [":method", "POST"],
  [":scheme", "http"],
  [":path", METHOD],
  [":authority", "localhost"],
  ["content-type", "application/grpc"],
  ["te", "trailers"],
]);
export const RESPONSE = encodeHeaders([
  [":status", "200"],
  ["content-type", "application/grpc"],
]);
export const TRAILERS = encodeHeaders([["grpc-status", "0"]]);

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
export const peerBytes = (valid: Buffer[], ids: number[], blocks: Buffer[], keep = 0) =>
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
export const clientExchange = [
  rawFrame(T.SETTINGS, 0, 0),
  rawFrame(T.HEADERS, F.END_HEADERS, 1, REQUEST),
  rawFrame(T.DATA, F.END_STREAM, 1, grpcMessage(Buffer.from("q"))),
  rawFrame(T.HEADERS, F.END_HEADERS, 3, REQUEST),
  rawFrame(T.DATA, F.END_STREAM, 3, grpcMessage(Buffer.from("r"))),
];
/** A server's answer to stream 1. */
export const serverExchange = [
  rawFrame(T.SETTINGS, 0, 0),
  rawFrame(T.HEADERS, F.END_HEADERS, 1, RESPONSE),
  rawFrame(T.DATA, 0, 1, grpcMessage(Buffer.from("x"))),
  rawFrame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, TRAILERS),
];

/** A socket that takes everything written, records it, and whether it was terminated. */
export function recordingSocket() {
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
export function frameTypes(bytes: Buffer): number[] {
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
export function held(session: object): { partial: number; block: number } {
  const s = session as {
    received: { held: number };
    headerBlocks: { partial?: { bytes: number } };
  };
  return { partial: s.received.held, block: s.headerBlocks.partial?.bytes ?? 0 };
}
