import { describe, expect, test } from "bun:test";
import { hostDevicePatternProblem } from "../../../src/util/device-glob.ts";

describe("hostDevicePatternProblem()", () => {
  const cases: [string, string | undefined][] = [
    ["/dev/ttyUSB*", undefined],
    ["/dev/serial/by-id/*", undefined],
    ["/dev/bus/usb/*/*", undefined],
    ["/dev/video[0-3]", undefined],
    ["/dev/tty[!A-Z]?", undefined],
    ["/dev/ttyAMA0", undefined],
    ["dev/ttyUSB*", "must be an absolute path"],
    ["/dev/../etc/shadow", 'must not have "." or ".." segments'],
    ["/dev/./ttyS0", 'must not have "." or ".." segments'],
    ["/dev/**", 'must not contain "**"'],
    ["/dev/tty{S,USB}*", "must not contain {, } or \\"],
    ["/dev/tty\\*", "must not contain {, } or \\"],
    ["/dev/!tty", 'must not have a segment starting with "!"'],
    ["/dev/tty[0-9", 'has a "[" without its "]" in "tty[0-9"'],
    ["/dev//ttyS0", 'must not have an empty segment ("//")'],
    ["/dev/", 'must name device files, not end with "/"'],
    ["/", 'must name device files, not end with "/"'],
  ];
  for (const [pattern, problem] of cases) {
    test(`${pattern}: ${problem ?? "accepted"}`, () => {
      const got = hostDevicePatternProblem(pattern);
      if (problem === undefined) expect(got).toBeUndefined();
      else expect(got).toStartWith(problem);
    });
  }
});
