// Properties of the quantity parser under arbitrary input: any string parses or throws
// QuantityParseError (never another error); what parses prints back to an equal quantity, or,
// below a nano (which Kubernetes does not keep), to the next nano up, and that text is stable.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import {
  compareQuantity,
  formatQuantity,
  parseQuantity,
  QuantityParseError,
} from "../../../src/api/quantity.ts";
import { fuzz } from "../../lib/fuzz.ts";

const suffix = fc.constantFrom(
  ...["", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"],
  ...["e3", "E-2", "e+101", "n", "u", "i", "KI", "toString", "__proto__"],
);
const quantityLike = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc
    .tuple(
      fc.constantFrom("", "-", "+"),
      fc.stringMatching(/^[0-9]{0,30}(\.[0-9]{0,12})?$/),
      suffix,
    )
    .map(([s, n, u]) => s + n + u),
);

describe("parseQuantity under arbitrary input", () => {
  test("gives a quantity or a QuantityParseError, and formats what it gives to a stable text", async () => {
    await fuzz(
      "quantity",
      quantityLike,
      (text) => {
        let q: ReturnType<typeof parseQuantity>;
        try {
          q = parseQuantity(text);
        } catch (err) {
          expect(err).toBeInstanceOf(QuantityParseError);
          return;
        }
        const printed = formatQuantity(q);
        const back = parseQuantity(printed);
        expect(compareQuantity(back, q)).toBe(q.scale <= 9 ? 0 : 1);
        expect(formatQuantity(back)).toBe(printed);
      },
      { seed: 30_001, runs: 2000 },
    );
  });
});
