import { describe, expect, test } from "bun:test";
import { getPodQOS, type PodQOSClass, type ResourceRequirements } from "../../../src/api/index.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

function res(
  requests?: Record<string, string>,
  limits?: Record<string, string>,
): ResourceRequirements {
  return { ...(requests ? { requests } : {}), ...(limits ? { limits } : {}) };
}

const full = { cpu: "500m", memory: "128Mi" };

describe("getPodQOS()", () => {
  const cases: [string, ResourceRequirements[], ResourceRequirements[], PodQOSClass][] = [
    ["no requests or limits", [{}], [], "BestEffort"],
    ["only non-compute resources", [res({ "ephemeral-storage": "1Gi" })], [], "BestEffort"],
    ["zero requests", [res({ cpu: "0", memory: "0" })], [], "BestEffort"],
    ["equal cpu and memory requests and limits", [res(full, full)], [], "Guaranteed"],
    ["limits only (requests defaulted from them)", [res(undefined, full)], [], "Guaranteed"],
    [
      "equal values written differently",
      [res({ cpu: "0.5", memory: "134217728" }, full)],
      [],
      "Guaranteed",
    ],
    ["a request below its limit", [res({ cpu: "100m", memory: "128Mi" }, full)], [], "Burstable"],
    ["a cpu limit without a memory limit", [res(undefined, { cpu: "1" })], [], "Burstable"],
    ["requests only", [res({ memory: "64Mi" })], [], "Burstable"],
    ["one guaranteed and one best-effort container", [res(full, full), {}], [], "Burstable"],
    ["guaranteed app and init containers", [res(full, full)], [res(full, full)], "Guaranteed"],
    ["a best-effort init container", [res(full, full)], [{}], "Burstable"],
    ["only an init container with requests", [{}], [res({ cpu: "1" })], "Burstable"],
    [
      "guaranteed with extra non-compute resources",
      [res({ ...full, "ephemeral-storage": "1Gi" }, full)],
      [],
      "Guaranteed",
    ],
  ];
  for (const [what, app, init, expected] of cases) {
    test(`is ${expected} for ${what}`, () => {
      const pod = makePod({
        containers: app.map((resources, i) => makeContainer({ name: `c${i}`, resources })),
        initContainers: init.map((resources, i) => makeContainer({ name: `i${i}`, resources })),
      });
      expect(getPodQOS(pod)).toBe(expected);
    });
  }
});
