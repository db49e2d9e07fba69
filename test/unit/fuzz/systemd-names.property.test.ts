// Properties of the systemd slice names (src/agent/cm/systemd-names.ts): every cgroup name whose
// levels a slice can hold reads back from its slice and from its path; the path ends with the
// slice and has one level per level of the name; any text gives a name or the documented error.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import {
  cgroupNameOfSlice,
  expandSlice,
  sliceName,
  systemdCgroupPath,
} from "../../../src/agent/cm/systemd-names.ts";
import { fuzz, fuzzTimeout } from "../../lib/fuzz.ts";

const TIMEOUT = fuzzTimeout(30_000);
const level = fc.stringMatching(/^[a-z0-9.-]{1,12}$/).filter((l) => l !== "." && l !== "..");

describe("systemd slice name properties (no root)", () => {
  test(
    "a cgroup name reads back from its slice and its path",
    async () => {
      await fuzz(
        "systemd-names-roundtrip",
        fc.array(level, { maxLength: 5 }),
        (levels) => {
          const name = `/${levels.join("/")}`;
          const slice = sliceName(name);
          const path = systemdCgroupPath(name);
          expect(cgroupNameOfSlice(slice)).toBe(name);
          expect(cgroupNameOfSlice(path)).toBe(name);
          if (levels.length === 0) {
            expect([slice, path]).toEqual(["-.slice", "/"]);
            return;
          }
          expect(path.endsWith(`/${slice}`)).toBe(true);
          expect(path.split("/").length - 1).toBe(levels.length);
        },
        { seed: 30_536, runs: 300 },
      );
    },
    TIMEOUT,
  );

  test(
    "any text is a slice or the documented error",
    async () => {
      const text = fc.oneof(
        fc.string({ maxLength: 30 }),
        fc.stringMatching(/^[a-z_/-]{0,12}(\.slice)?$/),
      );
      await fuzz(
        "systemd-names-text",
        text,
        (s) => {
          for (const f of [expandSlice, cgroupNameOfSlice, sliceName]) {
            try {
              f(s);
            } catch (e) {
              expect(e).toBeInstanceOf(Error);
              expect((e as Error).message).toMatch(
                /is not a systemd slice name|which a systemd slice cannot hold/,
              );
            }
          }
        },
        { seed: 30_537, runs: 400 },
      );
    },
    TIMEOUT,
  );
});
