// SPDY framing: the dictionary, header blocks both ways, frames cut from a byte stream.
import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { constants, createDeflate } from "node:zlib";
import {
  HeaderDeflater,
  HeaderInflater,
  SPDY,
  SPDY_DICTIONARY,
  SpdyReader,
  spdyFrames,
} from "../../../src/streams/spdy.ts";

/** Header blocks as a real SPDY peer compresses them: one zlib stream, a sync flush each. */
async function peerBlocks(blocks: Buffer[]): Promise<Buffer[]> {
  const z = createDeflate({ dictionary: SPDY_DICTIONARY });
  const out: Buffer[] = [];
  for (const b of blocks) {
    const chunks: Buffer[] = [];
    const onData = (c: Buffer) => chunks.push(c);
    z.on("data", onData);
    z.write(b);
    await new Promise<void>((r) => z.flush(constants.Z_SYNC_FLUSH, () => r()));
    z.off("data", onData);
    out.push(Buffer.concat(chunks));
  }
  z.close();
  return out;
}

function block(headers: Record<string, string>): Buffer {
  const parts: Buffer[] = [];
  const u32 = (n: number) => Buffer.from([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255]);
  parts.push(u32(Object.keys(headers).length));
  for (const [k, v] of Object.entries(headers))
    parts.push(u32(k.length), Buffer.from(k), u32(v.length), Buffer.from(v));
  return Buffer.concat(parts);
}

describe("SPDY", () => {
  test("its dictionary is the protocol's 1423 bytes", () => {
    expect(SPDY_DICTIONARY.length).toBe(1423);
    expect(createHash("sha256").update(SPDY_DICTIONARY).digest("hex")).toBe(
      "51d27341373f923f3cd88e1eb7162aeaa3723d7585ff2399201dc06498407f02",
    );
  });

  test("HeaderInflater reads a peer's header blocks one by one, each with the window before it", async () => {
    const headers = [
      { streamtype: "error", port: "80", requestid: "0" },
      { streamtype: "data", port: "80", requestid: "0" },
      { streamtype: "error", port: "80", requestid: "1" },
    ];
    const compressed = await peerBlocks(headers.map(block));
    const inflater = new HeaderInflater();
    for (const [i, c] of compressed.entries())
      expect(Object.fromEntries(inflater.decode(c))).toEqual(headers[i] as Record<string, string>);
  });

  test("HeaderDeflater's blocks are one zlib stream with the dictionary", async () => {
    const d = new HeaderDeflater();
    const blocks = [d.encode({ a: "1" }), d.encode({ streamtype: "stdin" })];
    const inflater = new HeaderInflater();
    expect(Object.fromEntries(inflater.decode(blocks[0] as Buffer))).toEqual({ a: "1" });
    expect(Object.fromEntries(inflater.decode(blocks[1] as Buffer))).toEqual({
      streamtype: "stdin",
    });
  });

  test("SpdyReader cuts frames from any split of the stream, and refuses another version", () => {
    const d = new HeaderDeflater();
    const bytes = Buffer.concat([
      spdyFrames.synStream(d, 1, { streamtype: "data" }),
      spdyFrames.data(1, Buffer.from("hello"), true),
      spdyFrames.rstStream(1, SPDY.cancel),
    ]);
    const r = new SpdyReader();
    const frames = [...bytes].flatMap((b) => r.push(Uint8Array.of(b)));
    expect(
      frames.map((f) =>
        f.control ? `control ${f.type}` : `data ${f.streamId} ${f.data} fin=${f.flags}`,
      ),
    ).toEqual(["control 1", "data 1 hello fin=1", "control 3"]);
    expect(() => new SpdyReader().push(Buffer.from([0x80, 0x02, 0, 1, 0, 0, 0, 0]))).toThrow(
      "SPDY version 2",
    );
  });
});
