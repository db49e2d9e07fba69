// The dashboard's reading of a node's clock skew (src/hub/dashboard/skew.js, plain browser JS)
// must agree with what the hub writes (skewText) and with the CLI's 2-minute flag.
import { describe, expect, test } from "bun:test";
import { clockSkewState, parseSkew } from "../../../src/hub/dashboard/skew.js";
import { skewText } from "../../../src/hub/views.ts";
import { CLOCK_SKEW_WARN_MS, HUB_ANNOTATIONS } from "../../../src/protocol/index.ts";

const node = (skew?: string) => {
  const annotations: Record<string, string> = {};
  if (skew !== undefined) annotations[HUB_ANNOTATIONS.clockSkew] = skew;
  return { metadata: { annotations } };
};

describe("the dashboard's clock skew", () => {
  test.each([0, 999, -45_000, 120_000, -120_001, 3 * 3_600_000 + 12_000, -1_767_225_600_000])(
    "parseSkew() reads back what the hub writes for %d ms",
    (ms) => {
      expect(parseSkew(skewText(ms))).toBe(Math.round(ms / 1000) * 1000 || 0);
    },
  );

  test.each([
    ["-3h0m12s", { label: "Clock 3h0m12s behind", tone: "warn" }],
    ["2m1s", { label: "Clock 2m1s ahead", tone: "warn" }],
    ["-2m0s", { label: "Clock 2m0s behind", tone: "ok" }],
    ["45s", { label: "Clock 45s ahead", tone: "ok" }],
    ["0s", { label: "Clock in sync", tone: "ok" }],
  ])("clockSkewState() of %s", (text, want) => {
    expect(clockSkewState(node(text))).toMatchObject(want);
  });

  test("no annotation, or one it cannot read, shows nothing", () => {
    expect(clockSkewState(node())).toBeUndefined();
    expect(clockSkewState(node("soon"))).toBeUndefined();
  });

  test("the flag threshold is the hub's", () => {
    expect(clockSkewState(node(skewText(CLOCK_SKEW_WARN_MS)))?.tone).toBe("ok");
    expect(clockSkewState(node(skewText(CLOCK_SKEW_WARN_MS + 1000)))?.tone).toBe("warn");
  });
});
