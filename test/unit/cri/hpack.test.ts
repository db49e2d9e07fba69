import { describe, expect, test } from "bun:test";
import { encodeHeaders, HpackDecoder, HpackError, huffmanDecode } from "../../../src/cri/hpack.ts";
import { nghttp2Deflater, nghttp2Inflater } from "../../lib/nghttp2.ts";
import { prng } from "../../lib/prng.ts";

const NAMES = [":status", "content-type", "grpc-status", "grpc-message", "date", "x-a", "x-long"];

function randomText(rand: () => number, max: number): string {
  const ranges = [
    [0x20, 0x7e],
    [0x00, 0x1f],
    [0xa0, 0x17f],
    [0x3040, 0x30ff],
    [0x1f600, 0x1f64f],
  ] as const;
  let s = "";
  const n = Math.floor(rand() * max);
  for (let i = 0; i < n; i++) {
    const [lo, hi] = ranges[Math.floor(rand() * (rand() < 0.7 ? 1 : ranges.length))] as readonly [
      number,
      number,
    ];
    s += String.fromCodePoint(lo + Math.floor(rand() * (hi - lo + 1)));
  }
  return s;
}

describe("HPACK decoder", () => {
  test("reads what nghttp2's encoder writes over many blocks: Huffman strings, the dynamic table, evictions", () => {
    const rand = prng(3);
    const nghttp2 = nghttp2Deflater();
    const ours = new HpackDecoder();
    try {
      for (let block = 0; block < 400; block++) {
        const fields: [string, string][] = Array.from(
          { length: 1 + Math.floor(rand() * 6) },
          () => {
            const name = NAMES[Math.floor(rand() * NAMES.length)] as string;
            // Repeated values make table hits; long ones evict older entries.
            const value =
              rand() < 0.3 ? "application/grpc" : randomText(rand, name === "x-long" ? 900 : 40);
            return [name, value];
          },
        );
        const encoded = nghttp2.encode(fields.map(([n, v]) => [Buffer.from(n), Buffer.from(v)]));
        expect(ours.decode(encoded)).toEqual(fields);
      }
    } finally {
      nghttp2.close();
    }
  });

  test("decodes the Huffman code of every byte value", () => {
    // Among many 5-bit symbols, nghttp2 codes even a 30-bit one with Huffman (it is shorter).
    for (let b = 0; b < 256; b++) {
      const value = Buffer.concat([
        Buffer.from("0".repeat(40)),
        Buffer.from([b]),
        Buffer.from("0".repeat(40)),
      ]);
      const deflater = nghttp2Deflater();
      const block = deflater.encode([[Buffer.from("x"), value]]);
      deflater.close();
      // 0x40, name "x" (raw, length 1), then the value: Huffman flag and a 7-bit prefixed length.
      expect(block.subarray(0, 3)).toEqual(Buffer.from([0x40, 0x01, 0x78]));
      expect((block[3] as number) & 0x80).toBe(0x80);
      const length = (block[3] as number) & 0x7f;
      expect(huffmanDecode(block, 4, 4 + length)).toEqual(value);
    }
  });

  test("refuses EOS in a string, bad padding, an index out of the table and a cut block", () => {
    const d = new HpackDecoder();
    // A Huffman string of 4 bytes of all ones holds EOS (30 one bits).
    expect(() => d.decode(Buffer.from([0x00, 0x01, 0x61, 0x84, 0xff, 0xff, 0xff, 0xff]))).toThrow(
      HpackError,
    );
    // '0' is 00000: a byte 0x00 leaves 3 zero bits as padding, which must be ones.
    expect(() => huffmanDecode(Buffer.from([0x00]), 0, 1)).toThrow("bad padding");
    expect(() => d.decode(Buffer.from([0x80 | 70]))).toThrow("index 70 is not in the table");
    expect(() => d.decode(Buffer.from([0x00, 0x05, 0x61]))).toThrow("runs past");
  });

  test("follows table size updates and refuses one above its limit", () => {
    const d = new HpackDecoder(4096);
    // Add an entry, shrink the table to 0 (evicting it), grow it back.
    d.decode(Buffer.from([0x40, 0x01, 0x61, 0x01, 0x62]));
    expect(d.decode(Buffer.from([0x80 | 62]))).toEqual([["a", "b"]]);
    expect(() => d.decode(Buffer.from([0x20, 0x80 | 62]))).toThrow("index 62");
    // 4096 is allowed, 4097 is not.
    expect(d.decode(Buffer.from([0x3f, 0xe1, 0x1f]))).toEqual([]);
    expect(() => d.decode(Buffer.from([0x3f, 0xe2, 0x1f]))).toThrow("above the limit");
  });
});

describe("HPACK encoder of request headers", () => {
  test("writes what nghttp2's decoder reads, adding nothing to its table", () => {
    const inflater = nghttp2Inflater();
    try {
      const headers: [string, string][] = [
        [":method", "POST"],
        [":scheme", "http"],
        [":path", "/runtime.v1.RuntimeService/ListContainers"],
        [":authority", "localhost"],
        ["content-type", "application/grpc"],
        ["te", "trailers"],
        ["grpc-timeout", "10000m"],
        ["x-é", "日本".repeat(100)],
      ];
      for (let i = 0; i < 3; i++) expect(inflater.decode(encodeHeaders(headers))).toEqual(headers);
    } finally {
      inflater.close();
    }
  });
});
