// Properties of the HPACK decoder (src/cri/hpack.ts) under arbitrary and near-valid header
// blocks: every block decodes to header fields or throws HpackError or HeaderListTooLarge (never
// another error); what it returns never adds up to more than the list limit it was given, and its
// dynamic table never holds more than the SETTINGS_HEADER_TABLE_SIZE it was made with. Blocks
// built from every representation (indexed, literal with, without and never indexed, table size
// updates, Huffman-coded strings from RFC 7541's examples) decode to what a model table says.
// And encodeHeaders() then decode() gives back any header list.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import {
  encodeHeaders,
  HeaderListTooLarge,
  HpackDecoder,
  HpackError,
} from "../../../src/cri/hpack.ts";
import { fuzz } from "../../lib/fuzz.ts";
import { mutated } from "../../lib/wire-mutations.ts";

/** An integer with an N-bit prefix (RFC 7541 5.1), its first byte starting with `flags`. */
function int(flags: number, prefix: number, value: number): number[] {
  const max = (1 << prefix) - 1;
  if (value < max) return [flags | value];
  const out = [flags | max];
  let v = value - max;
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
  return out;
}

/** A string as a block holds it: [its text, its bytes]; Huffman-coded ones from RFC 7541 C.4. */
type Str = [string, number[]];
const HUFFMAN: Str[] = [
  ["www.example.com", [...Buffer.from("f1e3c2e5f23a6ba0ab90f4ff", "hex")]],
  ["no-cache", [...Buffer.from("a8eb10649cbf", "hex")]],
  ["custom-key", [...Buffer.from("25a849e95ba97d7f", "hex")]],
  ["custom-value", [...Buffer.from("25a849e95bb8e8b4bf", "hex")]],
];
const str: fc.Arbitrary<Str> = fc.oneof(
  fc.string({ maxLength: 40, unit: "grapheme" }).map((s): Str => {
    const b = Buffer.from(s);
    return [s, [...int(0, 7, b.length), ...b]];
  }),
  fc.constantFrom(...HUFFMAN).map(([s, h]): Str => [s, [...int(0x80, 7, h.length), ...h]]),
);

/** One representation of RFC 7541 section 6. `index`: a table index (0: a literal name). */
type Op =
  | { k: "indexed"; index: number }
  | { k: "incremental" | "without" | "never"; index: number; name: Str; value: Str }
  | { k: "size"; size: number };

const LIMIT = 256;
const index = fc.oneof(fc.integer({ min: 0, max: 70 }), fc.integer({ min: 0, max: 2 ** 20 }));
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ k: fc.constant("indexed" as const), index }),
  fc.record({
    k: fc.constantFrom("incremental" as const, "without" as const, "never" as const),
    index: fc.oneof(fc.constant(0), index),
    name: str,
    value: str,
  }),
  fc.record({ k: fc.constant("size" as const), size: fc.integer({ min: 0, max: LIMIT + 40 }) }),
);

function encodeOp(o: Op): number[] {
  if (o.k === "indexed") return int(0x80, 7, o.index);
  if (o.k === "size") return int(0x20, 5, o.size);
  const [flags, prefix] = { incremental: [0x40, 6], without: [0x00, 4], never: [0x10, 4] }[o.k];
  const name = o.index === 0 ? o.name[1] : [];
  return [...int(flags as number, prefix as number, o.index), ...name, ...o.value[1]];
}

/** What RFC 7541 says a block of `ops` decodes to, with a table of `table` (newest first). */
class Model {
  table: [string, string][] = [];
  capacity = LIMIT;
  constructor(private readonly staticNames: [string, string][]) {}

  entry(i: number): [string, string] {
    const e = i === 0 ? undefined : (this.staticNames[i - 1] ?? this.table[i - 62]);
    if (e === undefined) throw new Error(`index ${i}`);
    return e;
  }

  apply(o: Op): [string, string] | undefined {
    if (o.k === "indexed") return this.entry(o.index);
    if (o.k === "size") {
      if (o.size > LIMIT) throw new Error("size");
      this.capacity = o.size;
      this.evict();
      return undefined;
    }
    const field: [string, string] = [
      o.index === 0 ? o.name[0] : this.entry(o.index)[0],
      o.value[0],
    ];
    if (o.k === "incremental") {
      this.table.unshift(field);
      this.evict();
    }
    return field;
  }

  private evict(): void {
    const size = (e: [string, string]) => Buffer.byteLength(e[0]) + Buffer.byteLength(e[1]) + 32;
    while (this.table.reduce((n, e) => n + size(e), 0) > this.capacity) this.table.pop();
  }
}

/** The static table, read back through a decoder (indexes 1..61). */
const STATIC: [string, string][] = Array.from({ length: 61 }, (_, i) => {
  const f = new HpackDecoder().decode(Buffer.from(int(0x80, 7, i + 1)))[0];
  return f as [string, string];
});

const fieldBytes = (fields: [string, string][]) =>
  fields.reduce((n, [a, b]) => n + Buffer.byteLength(a) + Buffer.byteLength(b) + 32, 0);

/** The decoder's dynamic table, read with indexed fields from 62 on (which change nothing). */
function tableOf(d: HpackDecoder): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 62; ; i++) {
    try {
      out.push(...d.decode(Buffer.from(int(0x80, 7, i))));
    } catch (err) {
      expect(err).toBeInstanceOf(HpackError);
      return out;
    }
  }
}

/** Decodes `block`; returns the fields, or undefined for the errors the decoder may throw. */
function decodeOrRefuse(d: HpackDecoder, block: Uint8Array, maxList: number) {
  try {
    const fields = d.decode(block, maxList);
    expect(fieldBytes(fields)).toBeLessThanOrEqual(maxList);
    return fields;
  } catch (err) {
    if (!(err instanceof HpackError) && !(err instanceof HeaderListTooLarge)) throw err;
    return undefined;
  }
}

const blocks = fc.array(fc.array(op, { maxLength: 12 }), { minLength: 1, maxLength: 3 });

describe("HpackDecoder under arbitrary and near-valid header blocks", () => {
  test("blocks of every representation decode to what a model table says, or fail with HpackError", async () => {
    await fuzz(
      "hpack-model",
      blocks,
      (opsOfBlocks) => {
        const d = new HpackDecoder(LIMIT);
        const model = new Model(STATIC);
        for (const ops of opsOfBlocks) {
          let want: [string, string][] | undefined = [];
          try {
            for (const o of ops) {
              const f = model.apply(o);
              if (f !== undefined) want.push(f);
            }
          } catch {
            want = undefined;
          }
          const block = Buffer.from(ops.flatMap(encodeOp));
          if (want === undefined) {
            expect(() => d.decode(block)).toThrow(HpackError);
            return;
          }
          expect(d.decode(block)).toEqual(want);
          expect(tableOf(d)).toEqual(model.table);
        }
      },
      { seed: 30_701, runs: 600 },
    );
  });

  test("mutated blocks decode within the list and table limits, or fail with a compression error", async () => {
    const input = fc.tuple(blocks, fc.integer({ min: 0, max: 2048 }), fc.nat());
    await fuzz(
      "hpack-mutated",
      input.chain(([opsOfBlocks, maxList]) =>
        fc.tuple(
          fc.constant(maxList),
          fc.tuple(...opsOfBlocks.map((ops) => mutated(Buffer.from(ops.flatMap(encodeOp))))),
        ),
      ),
      ([maxList, bytesOfBlocks]) => {
        const d = new HpackDecoder(LIMIT);
        for (const block of bytesOfBlocks) {
          decodeOrRefuse(d, block, maxList);
          expect(fieldBytes(tableOf(d))).toBeLessThanOrEqual(LIMIT);
        }
      },
      { seed: 30_702, runs: 600 },
    );
  });

  test("arbitrary bytes decode within the limits, or fail with a compression error", async () => {
    await fuzz(
      "hpack-bytes",
      fc.tuple(fc.uint8Array({ maxLength: 200 }), fc.integer({ min: 0, max: 4096 })),
      ([block, maxList]) => {
        const d = new HpackDecoder(LIMIT);
        decodeOrRefuse(d, block, maxList);
        expect(fieldBytes(tableOf(d))).toBeLessThanOrEqual(LIMIT);
      },
      { seed: 30_703, runs: 1500 },
    );
  });

  test("encodeHeaders() then decode() gives back any header list", async () => {
    const text = fc.string({ maxLength: 30, unit: "grapheme" });
    // Names and values near the static table's: its names and fields, and text joined to them.
    const near = (i: 0 | 1) =>
      fc.oneof(
        text,
        fc.constantFrom(...STATIC.map((f) => f[i])),
        fc
          .tuple(fc.constantFrom(...STATIC.flat()), fc.constantFrom("", "\0", " "), text)
          .map(([a, sep, b]) => a + sep + b),
      );
    await fuzz(
      "hpack-roundtrip",
      fc.array(fc.tuple(near(0), near(1)), { maxLength: 20 }),
      (fields) => {
        expect(new HpackDecoder().decode(encodeHeaders(fields))).toEqual(fields);
      },
      { seed: 30_704, runs: 1500 },
    );
  });
});
