// fast-check arbitraries of protobuf messages for the property tests (test/unit/fuzz): a message
// of any schema of the embedded protos, every field present, in the shapes decodeMessage() gives
// back (int64 within 2^53, enums by name, absent messages null), map keys and strings including
// those JavaScript objects treat specially.
import fc from "fast-check";
import type { MessageSchema } from "../../src/cri/codec.ts";
import type { FieldSchema } from "../../src/cri/codec-schema.ts";

/** Map keys and strings that JavaScript objects treat specially, besides any text. */
const text = fc.oneof(
  fc.string({ maxLength: 12, unit: "grapheme" }),
  fc.constantFrom("", "__proto__", "constructor", "toString", "a\u0000b", "é日本😀"),
);

/** A value of `kind` as the decoder gives it back (int64 within 2^53, enums by name). */
function scalar(f: FieldSchema, kind = f.kind): fc.Arbitrary<unknown> {
  switch (kind) {
    case "string":
      return text;
    case "bytes":
      return fc.uint8Array({ maxLength: 16 }).map((b) => Buffer.from(b));
    case "bool":
      return fc.boolean();
    case "int32":
      return fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 });
    case "uint32":
      return fc.integer({ min: 0, max: 2 ** 32 - 1 });
    case "int64":
      return fc.maxSafeInteger();
    case "uint64":
      return fc.maxSafeNat();
    case "double":
      return fc.double();
    case "enum":
      return fc.constantFrom(...(f.enumNumbers?.keys() ?? []));
    default:
      throw new Error(`no scalar ${kind}`);
  }
}

/** A message of `s` with every field present, as decodeMessage() gives it. */
export function message(s: MessageSchema, depth = 0): fc.Arbitrary<Record<string, unknown>> {
  const parts: Record<string, fc.Arbitrary<unknown>> = {};
  for (const f of s.fields) {
    const one: fc.Arbitrary<unknown> =
      f.kind === "message"
        ? depth >= 3
          ? fc.constant(null)
          : fc.option(message(f.message as MessageSchema, depth + 1), { nil: null })
        : scalar(f);
    if (f.mapKey !== undefined) {
      const value = f.kind === "message" ? message(f.message as MessageSchema, depth + 1) : one;
      const entries = fc.uniqueArray(fc.tuple(text, value), {
        maxLength: 3,
        selector: (e) => e[0],
      });
      parts[f.name] = entries.map((e) => Object.fromEntries(e));
    } else if (f.repeated) {
      const item = f.kind === "message" ? message(f.message as MessageSchema, depth + 1) : one;
      parts[f.name] = fc.array(item, { maxLength: depth >= 2 ? 1 : 3 });
    } else parts[f.name] = one;
  }
  return fc.record(parts);
}
