import { describe, expect, test } from "bun:test";
import {
  addQuantity,
  compareQuantity,
  cpuToMilli,
  formatQuantity,
  integerValue,
  memoryToBytes,
  milliValue,
  parseQuantity,
  QuantityParseError,
} from "../../../src/api/index.ts";

describe("parseQuantity()", () => {
  const milli: [string | number, bigint][] = [
    ["100m", 100n],
    ["0.5", 500n],
    [".5", 500n],
    ["1.", 1000n],
    ["1", 1000n],
    [0.25, 250n],
    ["1e3", 1_000_000n],
    ["1E-3", 1n],
    ["+2", 2000n],
    ["-1", -1000n],
    ["1k", 1_000_000n],
    ["1Ki", 1_024_000n],
    ["1500u", 2n],
    ["1n", 1n],
    ["0.0001", 1n],
  ];
  for (const [text, expected] of milli) {
    test(`reads ${JSON.stringify(text)} as ${expected} milli-units, rounding up`, () => {
      expect(milliValue(parseQuantity(text))).toBe(expected);
    });
  }

  const bad = ["", "abc", "1.2.3", "1Gb", "12 GB", "1e", " 1", "1K", "1ki", "--1", "1e1000", "."];
  for (const text of bad) {
    test(`rejects ${JSON.stringify(text)} naming the value`, () => {
      expect(() => parseQuantity(text)).toThrow(QuantityParseError);
      expect(() => parseQuantity(text)).toThrow(`invalid quantity ${JSON.stringify(text)}`);
    });
  }
});

describe("memoryToBytes()", () => {
  const cases: [string, number][] = [
    ["128Mi", 134_217_728],
    ["1G", 1_000_000_000],
    ["1.5Gi", 1_610_612_736],
    ["1e3", 1000],
    ["0.5", 1],
    ["100m", 1],
    ["1Ei", 2 ** 60],
  ];
  for (const [text, bytes] of cases) {
    test(`converts ${text} to ${bytes} bytes`, () => {
      expect(memoryToBytes(text)).toBe(bytes);
    });
  }
});

describe("cpuToMilli()", () => {
  test("converts cores and millicores, rounding fractions of a millicore up", () => {
    expect([cpuToMilli("2"), cpuToMilli("250m"), cpuToMilli("0.1"), cpuToMilli("1.0001")]).toEqual([
      2000, 250, 100, 1001,
    ]);
  });
  test("throws for text that is not a quantity", () => {
    expect(() => cpuToMilli("two")).toThrow('invalid quantity "two"');
  });
});

describe("quantity arithmetic", () => {
  test("compareQuantity() compares across suffixes exactly", () => {
    const q = parseQuantity;
    expect(compareQuantity(q("1Gi"), q("1073741824"))).toBe(0);
    expect(compareQuantity(q("1G"), q("1Gi"))).toBe(-1);
    expect(compareQuantity(q("500m"), q("0.5"))).toBe(0);
    expect(compareQuantity(q("0.3"), q("299m"))).toBe(1);
  });
  test("addQuantity() adds exactly and formats the sum", () => {
    const sum = addQuantity(parseQuantity("0.1"), parseQuantity("200m"));
    expect(compareQuantity(sum, parseQuantity("300m"))).toBe(0);
    expect(sum.text).toBe("300m");
  });
  test("integerValue() rounds up", () => {
    expect(integerValue(parseQuantity("1.5"))).toBe(2n);
    expect(integerValue(parseQuantity("-1.5"))).toBe(-1n);
  });
  const formats: [string, string][] = [
    ["1536Mi", "1536Mi"],
    ["1.5", "1500m"],
    ["1000m", "1"],
    ["2e3", "2k"],
    ["0", "0"],
  ];
  for (const [text, expected] of formats) {
    test(`formatQuantity() writes ${text} as ${expected}`, () => {
      expect(formatQuantity(parseQuantity(text))).toBe(expected);
    });
  }
});
