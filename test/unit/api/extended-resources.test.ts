import { describe, expect, test } from "bun:test";
import { isExtendedResourceName } from "../../../src/api/index.ts";

describe("isExtendedResourceName()", () => {
  test.each([
    ["fleetlet.io/serial", true],
    ["vendor.example/gpu", true],
    ["nvidia.com/gpu", true],
    ["gpu", false],
    ["cpu", false],
    ["kubernetes.io/gpu", false],
    ["example.kubernetes.io/gpu", false],
    ["requests.vendor.example/gpu", false],
    ["vendor.example/", false],
    ["/gpu", false],
    ["vendor.example/bad name", false],
  ])("%s → %p", (name, expected) => {
    expect(isExtendedResourceName(name)).toBe(expected);
  });
});
