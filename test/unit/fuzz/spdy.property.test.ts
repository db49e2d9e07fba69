// Properties of SPDY/3.1 (src/streams/spdy.ts) and of the agent's exec session over it with the
// runtime (src/agent/streams/runtime-spdy.ts) under arbitrary and mutated frames: the frame reader
// cuts the same frames however the stream is split, or throws an Error saying what is wrong; a
// frame longer than its limit is refused at its header, before its body is held; header blocks
// round-trip, and a hostile one (not zlib, or inflating past the limit) throws an Error naming the
// header block, never more than the limit inflated; and whatever the runtime sends, the exec
// session never throws out of its socket's data handler (that would end the agent): it goes on,
// or closes with a reason.
import { describe, expect, test } from "bun:test";
import { EventEmitter } from "node:events";
import type net from "node:net";
import { deflateRawSync } from "node:zlib";
import fc from "fast-check";
import { SpdyExec } from "../../../src/agent/streams/runtime-spdy.ts";
import {
  HeaderDeflater,
  HeaderInflater,
  SPDY_DICTIONARY,
  type SpdyFrame,
  SpdyReader,
  spdyFrames,
} from "../../../src/streams/spdy.ts";
import { fuzz } from "../../lib/fuzz.ts";
import { mutated, splits } from "../../lib/wire-mutations.ts";

const latin1 = fc.string({
  maxLength: 12,
  unit: fc.integer({ min: 0, max: 255 }).map((c) => String.fromCharCode(c)),
});
const headers = fc.dictionary(
  latin1.map((s) => s.toLowerCase()),
  latin1,
  { maxKeys: 5, noNullPrototype: true },
);

/** A valid frame of any kind SPDY/3.1 has, its header blocks from `deflater`. */
const frameOf = (deflater: HeaderDeflater) =>
  fc.oneof(
    fc
      .tuple(fc.nat(), headers, fc.boolean())
      .map(([id, h, fin]) => spdyFrames.synStream(deflater, id, h, fin)),
    fc.tuple(fc.nat(), headers).map(([id, h]) => spdyFrames.synReply(deflater, id, h)),
    fc
      .tuple(fc.nat(), fc.uint8Array({ maxLength: 64 }), fc.boolean())
      .map(([id, d, fin]) => spdyFrames.data(id, d, fin)),
    fc.tuple(fc.nat(), fc.nat()).map(([id, s]) => spdyFrames.rstStream(id, s)),
    fc.nat().map((id) => spdyFrames.ping(id)),
    fc.nat().map((id) => spdyFrames.goAway(id)),
  );

/** Frames (or the error) a reader of limit `max` gives for `chunks`, pushed one by one. */
function read(chunks: Buffer[], max: number): { frames: SpdyFrame[]; error?: string } {
  const reader = new SpdyReader(max);
  const frames: SpdyFrame[] = [];
  try {
    for (const c of chunks)
      frames.push(...reader.push(c).map((f) => ({ ...f, data: Buffer.from(f.data) })));
  } catch (err) {
    expect(err).toBeInstanceOf(Error);
    return { frames, error: (err as Error).message };
  }
  return { frames };
}

const stream = fc
  .array(frameOf(new HeaderDeflater()), { maxLength: 6 })
  .chain((fs) => fc.oneof(fc.constant(Buffer.concat(fs)), mutated(Buffer.concat(fs), 4)))
  .chain((bytes) => fc.tuple(fc.constant(bytes), splits(bytes)));

describe("SpdyReader under arbitrary and mutated streams", () => {
  test("cuts the same frames however the stream is split, or fails with the same error", async () => {
    await fuzz(
      "spdy-reader-splits",
      fc.tuple(stream, fc.constantFrom(64, 16 << 20)),
      ([[bytes, chunks], max]) => {
        const whole = read([bytes], max);
        const split = read(chunks, max);
        expect(split.error).toBe(whole.error);
        // An error comes at the first bad frame header, so a split stream may cut fewer frames.
        if (whole.error === undefined) expect(split.frames).toEqual(whole.frames);
        for (const f of split.frames) expect(f.data.length).toBeLessThanOrEqual(max);
      },
      { seed: 30_721, runs: 800 },
    );
  });

  test("cuts a large frame arriving in many small chunks (its time, reported, grows with its size)", async () => {
    await fuzz(
      "spdy-reader-small-chunks",
      fc.tuple(fc.integer({ min: 0, max: 256 << 10 }), fc.integer({ min: 1, max: 512 })),
      ([size, chunk]) => {
        const frame = spdyFrames.data(1, Buffer.alloc(size, 0x61));
        const reader = new SpdyReader();
        const got: SpdyFrame[] = [];
        for (let at = 0; at < frame.length; at += chunk) {
          got.push(...reader.push(frame.subarray(at, at + chunk)));
        }
        expect(got.map((f) => f.data.length)).toEqual([size]);
      },
      { seed: 30_728, runs: 10 },
    );
  });

  test("refuses a frame longer than its limit at the frame's header", async () => {
    await fuzz(
      "spdy-reader-limit",
      fc.tuple(
        fc.boolean(),
        fc.integer({ min: 0, max: 0xffffff }),
        fc.integer({ min: 0, max: 1 << 20 }),
      ),
      ([control, length, max]) => {
        const head = Buffer.alloc(8);
        head.writeUInt32BE(control ? 0x80030001 : 1, 0);
        head.writeUInt32BE(length, 4);
        const reader = new SpdyReader(max);
        if (length > max)
          expect(() => reader.push(head)).toThrow(/a SPDY frame of \d+ bytes is too large/);
        else expect(reader.push(head)).toEqual(length === 0 ? [expect.anything()] : []);
      },
      { seed: 30_722, runs: 500 },
    );
  });
});

/** A header block's entries as an inflated block holds them. */
function rawBlock(entries: [string, string][]): Buffer {
  const u32 = (n: number) => {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n);
    return b;
  };
  return Buffer.concat([
    u32(entries.length),
    ...entries.flatMap(([k, v]) => [
      u32(k.length),
      Buffer.from(k, "latin1"),
      u32(v.length),
      Buffer.from(v, "latin1"),
    ]),
  ]);
}

/** The first header block of a zlib stream with SPDY's dictionary, compressed as it comes. */
function compressedFirst(raw: Buffer): Buffer {
  const head = Buffer.from([0x78, 0xbb, 0, 0, 0, 0]);
  let a = 1;
  let s = 0;
  for (const x of SPDY_DICTIONARY) {
    a = (a + x) % 65521;
    s = (s + a) % 65521;
  }
  head.writeUInt32BE(((s << 16) | a) >>> 0, 2);
  return Buffer.concat([head, deflateRawSync(raw, { dictionary: SPDY_DICTIONARY })]);
}

const HEADER_ERROR = /^a SPDY header block /;

describe("SPDY header blocks under hostile input", () => {
  test("a sequence of blocks round-trips through HeaderDeflater and HeaderInflater", async () => {
    await fuzz(
      "spdy-headers-roundtrip",
      fc.array(headers, { minLength: 1, maxLength: 5 }),
      (blocks) => {
        const d = new HeaderDeflater();
        const i = new HeaderInflater();
        for (const h of blocks) expect(Object.fromEntries(i.decode(d.encode(h)))).toEqual(h);
      },
      { seed: 30_723, runs: 250 },
    );
  });

  test("mutated blocks give headers or an Error naming the header block", async () => {
    const blocks = fc.array(headers, { minLength: 1, maxLength: 3 }).chain((hs) => {
      const d = new HeaderDeflater();
      return fc.tuple(...hs.map((h) => mutated(d.encode(h), 3)));
    });
    await fuzz(
      "spdy-headers-mutated",
      blocks,
      (bufs) => {
        const i = new HeaderInflater();
        for (const b of bufs) {
          try {
            i.decode(b);
          } catch (err) {
            expect(err).toBeInstanceOf(Error);
            expect((err as Error).message).toMatch(HEADER_ERROR);
          }
        }
      },
      { seed: 30_724, runs: 800 },
    );
  });

  test("a block inflating past the limit is refused, never inflated past it", async () => {
    const LIMIT = 4096;
    await fuzz(
      "spdy-headers-bomb",
      fc.tuple(fc.integer({ min: 0, max: 64 << 10 }), fc.nat({ max: 255 })),
      ([size, fill]) => {
        const raw = rawBlock([["x", Buffer.alloc(size, fill).toString("latin1")]]);
        const i = new HeaderInflater(LIMIT);
        if (raw.length > LIMIT)
          expect(() => i.decode(compressedFirst(raw))).toThrow(/past the limit of 4096 bytes/);
        else expect(i.decode(compressedFirst(raw)).get("x")?.length).toBe(size);
      },
      { seed: 30_725, runs: 150 },
    );
  });
});

/** A socket to the runtime that takes every write, and records whether it was closed. */
class FakeSocket extends EventEmitter {
  destroyed = false;
  write(): boolean {
    return true;
  }
  end(): void {
    this.destroy();
  }
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.emit("close");
  }
  pause(): void {}
  resume(): void {}
}

describe("the agent's exec over SPDY under a hostile runtime", () => {
  test("whatever the runtime sends, the session goes on or closes with a reason, and never throws", async () => {
    // The runtime's side: SYN_REPLY to the exec's streams (1, 3, 5), then frames of any kind.
    const runtime = fc
      .tuple(fc.array(frameOf(new HeaderDeflater()), { maxLength: 5 }), fc.boolean())
      .chain(([rest, replyFirst]) => {
        const d = new HeaderDeflater();
        const replies = replyFirst ? [1, 3, 5].map((id) => spdyFrames.synReply(d, id, {})) : [];
        const bytes = Buffer.concat([...replies, ...rest]);
        return fc.oneof(fc.constant(bytes), mutated(bytes, 4)).chain(splits);
      });
    await fuzz(
      "spdy-runtime-exec",
      runtime,
      async (chunks) => {
        const socket = new FakeSocket();
        const exec = new SpdyExec(socket as unknown as net.Socket, ["error", "stdin", "stdout"]);
        exec.ready.catch(() => {});
        const closes: [number, string][] = [];
        exec.onClose((code, reason) => closes.push([code, reason]));
        const got: number[] = [];
        exec.onData((channel) => {
          got.push(channel);
        });
        for (const c of chunks) socket.emit("data", c);
        if (closes.length > 0) expect(socket.destroyed).toBe(true);
        for (const [code, reason] of closes) if (code !== 1000) expect(reason).toMatch(/SPDY/);
        for (const ch of got) expect([0, 1, 3]).toContain(ch);
        exec.close();
      },
      { seed: 30_726, runs: 500 },
    );
  });
});

describe("the agent's exec over SPDY before its output is read", () => {
  test("holds at most 1 MiB of the runtime's output, then closes with the reason", async () => {
    await fuzz(
      "spdy-runtime-held",
      fc.array(fc.integer({ min: 0, max: 256 << 10 }), { maxLength: 12 }),
      (sizes) => {
        const socket = new FakeSocket();
        const exec = new SpdyExec(socket as unknown as net.Socket, ["error", "stdout"]);
        exec.ready.catch(() => {});
        const closes: string[] = [];
        exec.onClose((_code, reason) => closes.push(reason));
        let sent = 0;
        for (const n of sizes) {
          socket.emit("data", spdyFrames.data(3, Buffer.alloc(n)));
          sent += n;
        }
        expect(socket.destroyed).toBe(sent > 1 << 20);
        if (sent > 1 << 20) expect(closes[0]).toMatch(/more than 1048576 bytes of output/);
      },
      { seed: 30_727, runs: 40 },
    );
  });
});
