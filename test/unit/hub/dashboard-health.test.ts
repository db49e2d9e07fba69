import { describe, expect, test } from "bun:test";
import { sparkline } from "../../../src/hub/dashboard/sparkline.js";

describe("the dashboard's health sparkline", () => {
  test.each<[number[], string]>([
    [[], ""],
    [[5, 5, 5], "▁▁▁"],
    [[0, 7, 14], "▁▅█"],
    [[40, 41, 47, 40], "▁▂█▁"],
  ])("%p draws %p", (values, line) => {
    expect(sparkline(values)).toBe(line);
  });
});
