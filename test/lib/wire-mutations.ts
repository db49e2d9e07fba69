// Near-valid bytes for the property tests of wire parsers (test/unit/fuzz): a valid encoding with
// a few edits of the kinds that reach a parser's deep paths, which random bytes seldom do: bits
// flipped, bytes set to the values lengths and flags are made of, ranges cut, repeated or
// inserted, and the end cut off.
import fc from "fast-check";

type Edit =
  | { k: "flip"; at: number; bit: number }
  | { k: "set"; at: number; value: number }
  | { k: "cut"; at: number; n: number }
  | { k: "repeat"; at: number; n: number }
  | { k: "insert"; at: number; bytes: Uint8Array }
  | { k: "truncate"; at: number };

/** Byte values that lengths, flags and varints are made of. */
const BYTE = fc.oneof(
  fc.constantFrom(0x00, 0x01, 0x7f, 0x80, 0xff, 0xfe, 0x08, 0x0a, 0x12, 0x3f, 0x40),
  fc.integer({ min: 0, max: 255 }),
);

const at = fc.nat();
const edit: fc.Arbitrary<Edit> = fc.oneof(
  fc.record({ k: fc.constant("flip" as const), at, bit: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ k: fc.constant("set" as const), at, value: BYTE }),
  fc.record({ k: fc.constant("cut" as const), at, n: fc.integer({ min: 1, max: 16 }) }),
  fc.record({ k: fc.constant("repeat" as const), at, n: fc.integer({ min: 1, max: 32 }) }),
  fc.record({
    k: fc.constant("insert" as const),
    at,
    bytes: fc.uint8Array({ minLength: 1, maxLength: 8 }),
  }),
  fc.record({ k: fc.constant("truncate" as const), at }),
);

function apply(b: Buffer, e: Edit): Buffer {
  if (b.length === 0) return e.k === "insert" ? Buffer.from(e.bytes) : b;
  const i = e.at % b.length;
  switch (e.k) {
    case "flip":
      b[i] = (b[i] as number) ^ (1 << e.bit);
      return b;
    case "set":
      b[i] = e.value;
      return b;
    case "cut":
      return Buffer.concat([b.subarray(0, i), b.subarray(i + e.n)]);
    case "repeat":
      return Buffer.concat([b.subarray(0, i + e.n), b.subarray(i)]);
    case "insert":
      return Buffer.concat([b.subarray(0, i), e.bytes, b.subarray(i)]);
    case "truncate":
      return b.subarray(0, i);
  }
}

/** `valid` with 0 to `maxEdits` edits (a copy; `valid` is not changed). */
export function mutated(valid: Uint8Array, maxEdits = 4): fc.Arbitrary<Buffer> {
  return fc
    .array(edit, { maxLength: maxEdits })
    .map((edits) => edits.reduce(apply, Buffer.from(valid)));
}

/** `bytes` cut into pieces at arbitrary places (for readers fed a stream in chunks). */
export function splits(bytes: Uint8Array): fc.Arbitrary<Buffer[]> {
  return fc.array(fc.nat({ max: Math.max(0, bytes.length) }), { maxLength: 8 }).map((cuts) => {
    const sorted = [0, ...cuts.sort((a, b) => a - b), bytes.length];
    return sorted.slice(1).map((end, i) => Buffer.from(bytes.subarray(sorted[i] as number, end)));
  });
}
