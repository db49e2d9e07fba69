import { describe, expect, test } from "bun:test";
import {
  DurationParseError,
  humanDuration,
  parseDuration,
  shortHumanDuration,
} from "../../../src/api/index.ts";

const S = 1000;
const M = 60 * S;
const H = 60 * M;
const D = 24 * H;
const Y = 365 * D;

describe("parseDuration()", () => {
  const cases: [string, number][] = [
    ["20s", 20 * S],
    ["5m", 5 * M],
    ["1h30m", 90 * M],
    ["500ms", 500],
    ["1m30s", 90 * S],
    ["1.5h", 90 * M],
    ["0", 0],
    ["-2s", -2 * S],
    ["100us", 0.1],
    ["2h45m30.5s", 2 * H + 45 * M + 30_500],
  ];
  for (const [text, ms] of cases) {
    test(`reads ${text} as ${ms}ms`, () => {
      expect(parseDuration(text)).toBeCloseTo(ms, 6);
    });
  }

  const bad: [string, string][] = [
    ["", 'invalid syntax in duration ""'],
    ["10", 'missing unit in duration "10"'],
    ["10x", 'unknown unit "x" in duration "10x"'],
    ["s", 'invalid syntax in duration "s"'],
    ["1h 2m", 'unknown unit "h " in duration "1h 2m"'],
  ];
  for (const [text, message] of bad) {
    test(`rejects ${JSON.stringify(text)} with "${message}"`, () => {
      expect(() => parseDuration(text)).toThrow(DurationParseError);
      expect(() => parseDuration(text)).toThrow(message);
    });
  }
});

describe("humanDuration()", () => {
  const cases: [number, string][] = [
    [-3 * S, "<invalid>"],
    [-1500, "0s"],
    [0, "0s"],
    [45 * S, "45s"],
    [119 * S, "119s"],
    [2 * M, "2m"],
    [3 * M + 20 * S, "3m20s"],
    [9 * M + 59 * S, "9m59s"],
    [10 * M + 30 * S, "10m"],
    [179 * M, "179m"],
    [3 * H, "3h"],
    [5 * H + 3 * M, "5h3m"],
    [8 * H + 30 * M, "8h"],
    [47 * H, "47h"],
    [2 * D, "2d"],
    [3 * D + 4 * H, "3d4h"],
    [8 * D + 5 * H, "8d"],
    [729 * D, "729d"],
    [2 * Y + 30 * D, "2y30d"],
    [3 * Y, "3y"],
    [9 * Y + 100 * D, "9y"],
    [Number.NaN, "<invalid>"],
  ];
  for (const [ms, text] of cases) {
    test(`formats ${ms}ms as ${text}`, () => {
      expect(humanDuration(ms)).toBe(text);
    });
  }
});

describe("shortHumanDuration()", () => {
  test("keeps only the largest unit", () => {
    expect([59 * S, 90 * S, 5 * H + 3 * M, 3 * D, 400 * D].map(shortHumanDuration)).toEqual([
      "59s",
      "1m",
      "5h",
      "3d",
      "1y",
    ]);
  });
});
