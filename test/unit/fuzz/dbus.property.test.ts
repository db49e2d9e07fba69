// Properties of the D-Bus wire format (src/util/dbus): typed values of generated types read back
// as they were written, whole messages too and through the stream framer cut anywhere; random
// and mutated messages give a message or a DBusDecodeError (never another exception), with no
// more values than bytes, and a length beyond the limit is refused from the first 16 bytes.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { MessageFramer } from "../../../src/util/dbus/framer.ts";
import { marshal } from "../../../src/util/dbus/marshal.ts";
import {
  decodeMessage,
  encodeMessage,
  type Message,
  messageLength,
} from "../../../src/util/dbus/message.ts";
import {
  DBusDecodeError,
  DBusEncodeError,
  type DBusValue,
  type DType,
  signatureOf,
  Variant,
} from "../../../src/util/dbus/types.ts";
import { unmarshal } from "../../../src/util/dbus/unmarshal.ts";
import { fuzz, fuzzTimeout } from "../../lib/fuzz.ts";
import { mutated } from "../../lib/wire-mutations.ts";

const TIMEOUT = fuzzTimeout(30_000);
const BASIC = ["y", "b", "n", "q", "i", "u", "x", "t", "d", "s", "o", "g"] as const;

const basicType: fc.Arbitrary<DType> = fc.constantFrom(...BASIC).map((code) => ({ code }));

const typeArb: fc.Arbitrary<DType> = fc.letrec<{ t: DType }>((tie) => ({
  t: fc.oneof(
    { maxDepth: 4, depthSize: "small" },
    { weight: 4, arbitrary: basicType },
    fc.constant<DType>({ code: "v" }),
    tie("t").map((elem): DType => ({ code: "a", elem })),
    fc
      .array(tie("t"), { minLength: 1, maxLength: 4 })
      .map((fields): DType => ({ code: "(", fields })),
    fc
      .tuple(basicType, tie("t"))
      .map(([key, value]): DType => ({ code: "a", elem: { code: "{", key, value } })),
  ),
})).t;

const pathArb = fc
  .array(fc.stringMatching(/^[A-Za-z0-9_]{1,6}$/), { maxLength: 4 })
  .map((parts) => `/${parts.join("/")}`);

/** Text with every kind of code unit, lone surrogates and NUL included: the writer must refuse
 * what it cannot write faithfully. */
const textArb = fc.oneof(
  { weight: 4, arbitrary: fc.string({ unit: "binary", maxLength: 12 }) },
  fc.string({
    unit: fc.integer({ min: 0xd7ff, max: 0xe000 }).map((c) => String.fromCharCode(c)),
    maxLength: 3,
  }),
);

function valueArb(t: DType, depth = 0): fc.Arbitrary<DBusValue> {
  switch (t.code) {
    case "y":
      return fc.integer({ min: 0, max: 255 });
    case "b":
      return fc.boolean();
    case "n":
      return fc.integer({ min: -0x8000, max: 0x7fff });
    case "q":
      return fc.integer({ min: 0, max: 0xffff });
    case "i":
      return fc.integer({ min: -0x80000000, max: 0x7fffffff });
    case "u":
      return fc.integer({ min: 0, max: 0xffffffff });
    case "x":
      return fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });
    case "t":
      return fc.bigInt({ min: 0n, max: 2n ** 64n - 1n });
    case "d":
      return fc.double();
    case "s":
      return textArb;
    case "o":
      return pathArb;
    case "g":
      return typeArb.map(signatureOf);
    case "v":
      return depth > 3
        ? fc.string().map((s) => new Variant("s", s))
        : typeArb.chain((inner) =>
            valueArb(inner, depth + 1).map((v) => new Variant(signatureOf(inner), v)),
          );
    case "a":
      return fc.array(valueArb(t.elem, depth + 1), { maxLength: 3 });
    case "(":
      return fc.tuple(...t.fields.map((f) => valueArb(f, depth + 1)));
    case "{":
      return fc.tuple(valueArb(t.key, depth + 1), valueArb(t.value, depth + 1));
  }
}

const typedValues = fc
  .array(typeArb, { minLength: 0, maxLength: 4 })
  .filter((ts) => ts.map(signatureOf).join("").length <= 255)
  .chain((ts) =>
    fc.tuple(fc.constant(ts.map(signatureOf).join("")), fc.tuple(...ts.map((t) => valueArb(t)))),
  );

/** A string the writer may refuse: one with NUL or an unpaired surrogate. */
function unwritable(v: unknown): boolean {
  if (typeof v === "string") return v.includes("\0") || !v.isWellFormed();
  if (v instanceof Variant) return unwritable(v.value);
  return Array.isArray(v) && v.some(unwritable);
}

const messageArb: fc.Arbitrary<Message> = typedValues.chain(([signature, body]) =>
  fc.record({
    kind: fc.constant("signal" as const),
    flags: fc.integer({ min: 0, max: 3 }),
    serial: fc.constant(0),
    path: pathArb,
    interface: fc.constantFrom("org.freedesktop.systemd1.Manager", "a.b"),
    member: fc.constantFrom("JobRemoved", "M"),
    sender: fc.option(fc.constantFrom(":1.5", "org.freedesktop.systemd1"), { nil: undefined }),
    signature: fc.constant(signature),
    body: fc.constant(body),
  }),
);

function writable(m: Message, little = true): Uint8Array | null {
  try {
    return encodeMessage(m, 1, little);
  } catch (e) {
    expect(e).toBeInstanceOf(DBusEncodeError);
    expect(unwritable(m.body)).toBe(true);
    return null;
  }
}

/** How many values (containers and leaves) a decoded value holds. */
function count(v: unknown): number {
  if (v instanceof Variant) return 1 + count(v.value);
  if (Array.isArray(v)) return v.reduce((n: number, e) => n + count(e), 1);
  return 1;
}

/** `b` with its body length set to what its size and header-field length leave, so that a cut
 * or an insertion reaches the parser's inner checks instead of the first length check. */
function refitBodyLength(b: Uint8Array): Uint8Array {
  if (b.length < 16) return b;
  const little = b[0] !== 0x42;
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const body = b.length - 16 - Math.ceil(v.getUint32(12, little) / 8) * 8;
  if (body >= 0) v.setUint32(4, body, little);
  return b;
}

function decodesOrRefuses(bytes: Uint8Array, maxBytes: number): void {
  let m: Message | null = null;
  try {
    m = decodeMessage(bytes, maxBytes);
  } catch (e) {
    if (!(e instanceof DBusDecodeError)) throw e;
    return;
  }
  if (m !== null) expect(count(m.body)).toBeLessThanOrEqual(bytes.length);
}

describe("D-Bus wire format properties (no root)", () => {
  test(
    "every value of a generated type reads back as written in either byte order, or the writer refuses its text",
    async () => {
      await fuzz(
        "dbus-roundtrip",
        fc.tuple(typedValues, fc.boolean()),
        ([[sig, values], little]) => {
          let bytes: Uint8Array;
          try {
            bytes = marshal(sig, values, little);
          } catch (e) {
            expect(e).toBeInstanceOf(DBusEncodeError);
            expect(unwritable(values)).toBe(true);
            return;
          }
          expect(unmarshal(sig, bytes, little)).toEqual(values);
        },
        { seed: 30_531, runs: 400 },
      );
    },
    TIMEOUT,
  );

  test(
    "messages cut into chunks anywhere come out of the framer whole and in order",
    async () => {
      const arb = fc.tuple(
        fc.array(messageArb, { minLength: 1, maxLength: 3 }),
        fc.array(fc.nat(), { maxLength: 6 }),
      );
      await fuzz(
        "dbus-framer",
        arb,
        ([msgs, cuts]) => {
          const encoded = msgs.map((m) => writable(m)).filter((b): b is Uint8Array => b !== null);
          const all = Buffer.concat(encoded);
          const points = [...new Set(cuts.map((c) => c % (all.length + 1)))].sort((a, b) => a - b);
          const framer = new MessageFramer(1 << 20);
          const out: Message[] = [];
          let from = 0;
          for (const p of [...points, all.length]) {
            out.push(...framer.push(all.subarray(from, p)));
            from = p;
          }
          expect(out.map((m) => m.body)).toEqual(encoded.map((b) => decodeMessage(b)?.body ?? []));
          expect(out.length).toBe(encoded.length);
        },
        { seed: 30_532, runs: 200 },
      );
    },
    TIMEOUT,
  );

  test(
    "mutated messages of either byte order decode to a message or a DBusDecodeError, with no more values than bytes",
    async () => {
      const arb = fc
        .tuple(messageArb, fc.boolean(), fc.boolean())
        .chain(([m, little, refit]): fc.Arbitrary<Uint8Array> => {
          const b = writable(m, little);
          if (b === null) return fc.constant(new Uint8Array(0));
          return mutated(b, 4).map((x) => (refit ? refitBodyLength(x) : x));
        });
      await fuzz("dbus-mutated", arb, (b) => decodesOrRefuses(b, 1 << 20), {
        seed: 30_533,
        runs: 600,
      });
    },
    TIMEOUT,
  );

  test(
    "random bytes decode to a message or a DBusDecodeError",
    async () => {
      const start = fc.constantFrom([0x6c, 4, 0, 1], [0x42, 1, 0, 1], [0x6c, 3, 0, 1]);
      const arb = fc.oneof(
        fc.uint8Array({ maxLength: 200 }),
        fc
          .tuple(start, fc.uint8Array({ maxLength: 200 }))
          .map(([s, r]) => Uint8Array.from([...s, ...r])),
      );
      await fuzz("dbus-random", arb, (b) => decodesOrRefuses(b, 1 << 20), {
        seed: 30_534,
        runs: 600,
      });
    },
    TIMEOUT,
  );

  test(
    "a message's length beyond the limit is refused from its first 16 bytes",
    async () => {
      const arb = fc.tuple(
        fc.uint8Array({ minLength: 16, maxLength: 16 }),
        fc.integer({ min: 16, max: 1 << 20 }),
      );
      await fuzz(
        "dbus-length-limit",
        arb,
        ([start, max]) => {
          start[0] = start[0] === 0x42 ? 0x42 : 0x6c;
          start[3] = 1;
          try {
            expect(messageLength(start, max)).toBeLessThanOrEqual(max);
          } catch (e) {
            expect(e).toBeInstanceOf(DBusDecodeError);
            expect(String(e)).toContain("longer than the limit");
          }
        },
        { seed: 30_535, runs: 300 },
      );
    },
    TIMEOUT,
  );
});
