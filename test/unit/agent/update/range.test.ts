import { describe, expect, test } from "bun:test";
import { parseContentRange } from "../../../../src/agent/update/range.ts";

describe("parseContentRange()", () => {
  test.each([
    ["bytes 100-199/1000", [100, 1000]],
    ["bytes 0-0/1", [0, 1]],
    ["bytes 5-9/*", [5, undefined]],
    ["bytes */1000", undefined],
    ["items 0-1/2", undefined],
    ["bytes 1-2", undefined],
    [null, undefined],
  ])("reads %p as %p", (value, want) => {
    expect(parseContentRange(value)).toEqual(want as [number, number | undefined] | undefined);
  });
});
