import { describe, expect, test } from "bun:test";
import {
  containerDeviceNeeds,
  podDeviceNeeds,
} from "../../../../src/agent/cm/devicemanager/needs.ts";
import type { Container } from "../../../../src/api/types.ts";
import { makeContainer, makePod } from "../../../lib/builders.ts";

const SERIAL = "fleetlet.io/serial";
const GPU = "vendor.example/gpu";

function c(name: string, limits: Record<string, string>, extra: Partial<Container> = {}) {
  return makeContainer({ name, resources: { limits, requests: { ...limits } }, ...extra });
}

describe("containerDeviceNeeds()", () => {
  test.each([
    ["only extended resources count", { cpu: "1", memory: "64Mi", [SERIAL]: "2" }, { [SERIAL]: 2 }],
    ["kubernetes.io resources are not devices", { "example.kubernetes.io/x": "1" }, {}],
    ["hugepages are not devices", { "hugepages-2Mi": "4Mi" }, {}],
    ["a limit of 0 asks for nothing", { [SERIAL]: "0" }, {}],
    ["two resources", { [SERIAL]: "1", [GPU]: "3" }, { [SERIAL]: 1, [GPU]: 3 }],
  ])("%s", (_, limits, want) => {
    expect(containerDeviceNeeds(c("app", limits as Record<string, string>))).toEqual(want);
  });

  test("a container without resources needs nothing", () => {
    expect(containerDeviceNeeds(makeContainer())).toEqual({});
  });
});

describe("podDeviceNeeds()", () => {
  test.each<{ what: string; init: Container[]; app: Container[]; total: Record<string, number> }>([
    {
      what: "app containers add up",
      init: [],
      app: [c("a", { [SERIAL]: "1" }), c("b", { [SERIAL]: "2" })],
      total: { [SERIAL]: 3 },
    },
    {
      what: "a regular init container's devices are reused by the app containers",
      init: [c("i", { [SERIAL]: "2" })],
      app: [c("a", { [SERIAL]: "1" })],
      total: { [SERIAL]: 2 },
    },
    {
      what: "the apps' sum wins over a smaller init container",
      init: [c("i", { [SERIAL]: "2" })],
      app: [c("a", { [SERIAL]: "2" }), c("b", { [SERIAL]: "1" })],
      total: { [SERIAL]: 3 },
    },
    {
      what: "a sidecar keeps its devices beside the app containers",
      init: [c("side", { [SERIAL]: "1" }, { restartPolicy: "Always" })],
      app: [c("a", { [SERIAL]: "2" })],
      total: { [SERIAL]: 3 },
    },
    {
      what: "a sidecar started before a regular init container adds to its need",
      init: [c("side", { [SERIAL]: "1" }, { restartPolicy: "Always" }), c("i", { [SERIAL]: "2" })],
      app: [c("a", { [SERIAL]: "1" })],
      total: { [SERIAL]: 3 },
    },
    {
      what: "each resource on its own",
      init: [c("i", { [GPU]: "4" })],
      app: [c("a", { [SERIAL]: "1", [GPU]: "1" })],
      total: { [SERIAL]: 1, [GPU]: 4 },
    },
  ])("$what", ({ init, app, total }) => {
    const pod = makePod({ initContainers: init, containers: app });
    expect(podDeviceNeeds(pod).total).toEqual(total);
  });

  test("lists the containers with devices in allocation order, with their kind", () => {
    const pod = makePod({
      initContainers: [
        c("i", { [SERIAL]: "1" }),
        c("side", { [SERIAL]: "1" }, { restartPolicy: "Always" }),
        makeContainer({ name: "plain-init" }),
      ],
      containers: [makeContainer({ name: "plain" }), c("a", { [GPU]: "1" })],
    });
    expect(podDeviceNeeds(pod).containers).toEqual([
      { name: "i", kind: "init", resources: { [SERIAL]: 1 } },
      { name: "side", kind: "sidecar", resources: { [SERIAL]: 1 } },
      { name: "a", kind: "app", resources: { [GPU]: 1 } },
    ]);
  });
});
