import { describe, expect, test } from "bun:test";
import { podDisplayStatus } from "../../../src/agent/status/index.ts";
import { makePod } from "./builders.ts";
import { cases, type DisplayCase, podFor } from "./display-cases.ts";

describe("podDisplayStatus()", () => {
  for (const c of cases) {
    test(`shows ${c.name}`, () => {
      expect(podDisplayStatus(podFor(c))).toMatchObject(c.want);
    });
  }

  test("shows Terminating when the caller says the pod is being stopped", () => {
    const pod = podFor(cases[0] as DisplayCase);
    expect(podDisplayStatus(pod, { terminating: true }).status).toBe("Terminating");
  });

  test("shows the pod's reason when set, e.g. Evicted", () => {
    const pod = makePod();
    pod.status = { phase: "Failed", reason: "Evicted", containerStatuses: [] };
    expect(podDisplayStatus(pod)).toEqual({ status: "Evicted", ready: "0/1", restarts: 0 });
  });
});
