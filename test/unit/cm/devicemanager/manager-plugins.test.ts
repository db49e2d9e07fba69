import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  CHECKPOINT_FILE,
  readCheckpoint,
} from "../../../../src/agent/cm/devicemanager/checkpoint.ts";
import { makeContainer, makePod } from "../../../lib/builders.ts";
import { allocationFor, devicesOf, FakeDeviceEndpoint } from "../../../lib/fake-device-endpoint.ts";
import { until } from "../../../lib/until.ts";
import {
  GPU,
  type Harness,
  MIN,
  harness as makeHarness,
  podWith,
  SERIAL,
  serve,
  tempDir,
  uid,
  withDevices,
} from "./harness.ts";

let dir: ReturnType<typeof tempDir>;
beforeEach(() => {
  dir = tempDir();
});
afterEach(() => dir.remove());
const harness = (over: Parameters<typeof makeHarness>[1] = {}): Harness =>
  makeHarness(dir.path, over);

describe("DeviceManagerCore: devices and plugins", () => {
  test("capacity counts every device, allocatable the healthy ones; known groups show 0", () => {
    const h = harness({ knownResources: [GPU] });
    const ep = serve(h.manager, ["d0", "d1", "d2"]);
    ep.list([...devicesOf(["d0", "d1"]), { id: "d2", healthy: false }]);
    expect(h.manager.capacity()).toEqual({ [SERIAL]: 3, [GPU]: 0 });
    expect(h.manager.allocatable()).toEqual({ [SERIAL]: 2, [GPU]: 0 });
  });

  test("tells listeners when a list changes, not when the same list comes again", () => {
    const h = harness();
    const ep = serve(h.manager, ["d0"]);
    const before = h.changes;
    ep.list(devicesOf(["d0"]));
    expect(h.changes).toBe(before);
    ep.list(devicesOf(["d0"], false));
    expect(h.changes).toBe(before + 1);
  });

  test("a plugin that ends leaves its devices unhealthy, then dropped after the grace period", async () => {
    const h = harness({ gracePeriodMs: 5 * MIN });
    const ep = serve(h.manager, ["d0", "d1", "d2"]);
    const pod = podWith("a", 1);
    h.active = [pod];
    await h.manager.prepare(pod);
    ep.end(new Error("EOF"));
    expect(h.manager.capacity()).toEqual({ [SERIAL]: 3 });
    expect(h.manager.allocatable()).toEqual({ [SERIAL]: 0 });
    expect(h.manager.stats().resources[0]?.registered).toBe(false);
    h.clock.step(5 * MIN - 1);
    h.manager.checkExpiry();
    expect(h.manager.capacity()).toEqual({ [SERIAL]: 3 });
    h.clock.step(1);
    h.manager.checkExpiry();
    expect(h.manager.capacity()).toEqual({});
    expect(readCheckpoint(dir.path).checkpoint.registeredDevices).toEqual({});
    expect(h.manager.containerDevices(uid(pod), "app")).toEqual({ [SERIAL]: ["d0"] });
  });

  test("a plugin that registers again within the grace period keeps its resource", () => {
    const h = harness({ gracePeriodMs: 5 * MIN });
    serve(h.manager, ["d0", "d1"]).end();
    h.clock.step(4 * MIN);
    serve(h.manager, ["d0", "d1"]);
    h.clock.step(2 * MIN);
    h.manager.checkExpiry();
    expect(h.manager.allocatable()).toEqual({ [SERIAL]: 2 });
  });

  test("a second endpoint for a resource replaces the first, whose lists and end are ignored", () => {
    const h = harness();
    const old = serve(h.manager, ["d0", "d1"]);
    const next = new FakeDeviceEndpoint(SERIAL);
    h.manager.addEndpoint(next);
    expect(old.closed).toBe(true);
    next.list(devicesOf(["n0"]));
    old.closed = false; // a late message from the old stream
    old.list(devicesOf(["d0", "d1", "d2"]));
    old.end();
    expect(h.manager.capacity()).toEqual({ [SERIAL]: 1 });
    expect(h.manager.stats().resources[0]?.registered).toBe(true);
  });

  test("run() drops expired resources on its own and stops when aborted", async () => {
    const h = harness({ gracePeriodMs: MIN });
    serve(h.manager, ["d0"]).end();
    const start = h.clock.now();
    const abort = new AbortController();
    const running = h.manager.run(abort.signal);
    while (h.clock.now() - start <= MIN + 5_000) {
      await until("run() to sleep", () => h.clock.pending > 0);
      h.clock.step(1_000);
    }
    await until("run() to drop the resource", () => !(SERIAL in h.manager.capacity()));
    abort.abort();
    await running;
  });
});

describe("DeviceManagerCore: unhealthy devices under running pods", () => {
  test("one Warning event per pod for a held device turning unhealthy, however many lists", async () => {
    const h = harness();
    const ep = serve(h.manager, ["d0", "d1", "d2"]);
    const [a, b] = [podWith("a", 1), podWith("b", 1)];
    h.active = [a, b];
    await h.manager.prepare(a);
    await h.manager.prepare(b);
    const sick = [{ id: "d0", healthy: false }, ...devicesOf(["d1", "d2"])];
    ep.list(sick);
    ep.list(sick);
    expect(h.events).toEqual([
      `a Warning DeviceUnhealthy: Device d0 of ${SERIAL} is unhealthy; the pod keeps it until it ends`,
    ]);
    expect(h.manager.containerDevices(uid(a), "app")).toEqual({ [SERIAL]: ["d0"] });
    expect(h.manager.admit(podWith("c", 2), [a, b])?.message).toContain("Available: 1");
  });

  test("a held device that its plugin no longer lists is reported too", async () => {
    const h = harness();
    const ep = serve(h.manager, ["d0", "d1"]);
    const pod = podWith("a", 1);
    h.active = [pod];
    await h.manager.prepare(pod);
    ep.list(devicesOf(["d1"]));
    expect(h.events).toEqual([
      `a Warning DeviceUnhealthy: Device d0 of ${SERIAL} is no longer listed by its plugin; the pod keeps it until it ends`,
    ]);
  });
});

describe("DeviceManagerCore: the checkpoint", () => {
  test("after a restart, allocations are kept and never handed out twice", async () => {
    const first = harness();
    serve(first.manager, ["d0", "d1", "d2"]);
    const a = podWith("a", 2);
    first.active = [a];
    await first.manager.prepare(a);
    const held = first.manager.containerDevices(uid(a), "app")[SERIAL];

    const h = harness();
    h.active = [a];
    expect(h.manager.capacity()).toEqual({ [SERIAL]: 3 });
    expect(h.manager.allocatable()).toEqual({ [SERIAL]: 0 });
    expect(h.manager.admit(podWith("b", 1), [a])).toBeUndefined();
    const ep = serve(h.manager, ["d0", "d1", "d2"]);
    expect(h.manager.admit(a, [])).toBeUndefined();
    expect(await h.manager.prepare(a)).toEqual({ state: "ready" });
    expect(h.manager.containerDevices(uid(a), "app")[SERIAL]).toEqual(held);
    expect(h.manager.admit(podWith("b", 2), [a])?.message).toContain("Requested: 2, Available: 1");
    const b = podWith("b", 1);
    h.active = [a, b];
    await h.manager.prepare(b);
    expect(ep.allocateCalls).toEqual([["d2"]]);
  });

  test("after a restart a pod waits for a plugin the checkpoint knows", async () => {
    const first = harness();
    serve(first.manager, ["d0"]);
    const h = harness();
    const pod = podWith("a", 1);
    h.active = [pod];
    expect((await h.manager.prepare(pod)).state).toBe("waiting");
  });

  test("a malformed checkpoint is reported with its path and moved aside, and rebuilt", async () => {
    const path = join(dir.path, CHECKPOINT_FILE);
    writeFileSync(path, '{"Data": {"PodDeviceEntries": [');
    const h = harness();
    expect(h.logs.some((l) => l.includes("Device checkpoint not used") && l.includes(path))).toBe(
      true,
    );
    expect(existsSync(`${path}.corrupt`)).toBe(true);
    expect(h.manager.capacity()).toEqual({});
    serve(h.manager, ["d0"]);
    const pod = podWith("a", 1);
    h.active = [pod];
    expect(await h.manager.prepare(pod)).toEqual({ state: "ready" });
    expect(readCheckpoint(dir.path).checkpoint.entries.map((e) => e.deviceIds)).toEqual([["d0"]]);
  });

  test("removeStale() frees the devices of pods that are gone and rewrites the checkpoint", async () => {
    const h = harness();
    serve(h.manager, ["d0", "d1"]);
    const [a, b] = [podWith("a", 1), podWith("b", 1)];
    h.active = [a, b];
    await h.manager.prepare(a);
    await h.manager.prepare(b);
    const before = h.changes;
    h.manager.removeStale(new Set([uid(b)]));
    expect(h.changes).toBe(before + 1);
    expect(h.manager.containerDevices(uid(a), "app")).toEqual({});
    expect(readCheckpoint(dir.path).checkpoint.entries.map((e) => e.podUid)).toEqual([uid(b)]);
    expect(h.manager.stats().resources[0]?.allocated).toBe(1);
    expect(h.manager.admit(podWith("c", 1), [b])).toBeUndefined();
  });
});

describe("DeviceManagerCore before every pod source was seen", () => {
  test("frees no pod's devices: a pod not seen yet may be running with them", async () => {
    let ready = false;
    const h = harness({ sourcesReady: () => ready });
    serve(h.manager, ["d0", "d1"]);
    const [a, b] = [podWith("a", 1), podWith("b", 1)];
    h.active = [a];
    await h.manager.prepare(a);
    // Only b is known so far (the agent restarted; a comes from a source not read yet).
    h.active = [b];
    expect(await h.manager.prepare(b)).toEqual({ state: "ready" });
    expect(h.manager.containerDevices(uid(a), "app")).toEqual({ [SERIAL]: ["d0"] });
    expect(h.manager.containerDevices(uid(b), "app")).toEqual({ [SERIAL]: ["d1"] });
    ready = true;
    const c = podWith("c", 1);
    h.active = [b, c];
    // Once every source was seen, a pod no source wants gives its devices back.
    expect(await h.manager.prepare(c)).toEqual({ state: "ready" });
    expect(h.manager.containerDevices(uid(a), "app")).toEqual({});
    expect(h.manager.containerDevices(uid(c), "app")).toEqual({ [SERIAL]: ["d0"] });
  });
});

describe("DeviceManagerCore.resourceStatus()", () => {
  test("names a container's devices per resource with their health as the plugin lists it", async () => {
    const h = harness();
    const ep = serve(h.manager, ["d0", "d1"]);
    const pod = podWith("a", 2);
    h.active = [pod];
    await h.manager.prepare(pod);
    ep.list([
      { id: "d0", healthy: true },
      { id: "d1", healthy: false },
    ]);
    expect(h.manager.resourceStatus(uid(pod), "app")).toEqual([
      {
        name: SERIAL,
        resources: [
          { resourceID: "d0", health: "Healthy" },
          { resourceID: "d1", health: "Unhealthy" },
        ],
      },
    ]);
    expect(h.manager.resourceStatus(uid(pod), "other")).toEqual([]);
  });
});

describe("DeviceManagerCore.containerOptions()", () => {
  test("merges every resource's allocation, after PreStartContainer where required", async () => {
    const h = harness();
    const serial = serve(h.manager, ["s0"], SERIAL, { preStartRequired: true });
    const gpu = serve(h.manager, ["g0"], GPU);
    gpu.answer = (ids) => ({ ...allocationFor(GPU, ids), cdiDevices: ["vendor.example/gpu=0"] });
    const pod = makePod({
      name: "a",
      containers: [withDevices("app", { [SERIAL]: 1, [GPU]: 1 }), makeContainer({ name: "plain" })],
    });
    h.active = [pod];
    await h.manager.prepare(pod);
    const app = pod.spec.containers[0] as (typeof pod.spec.containers)[0];
    expect(await h.manager.containerOptions(pod, app)).toEqual({
      envs: { FLEETLET_IO_SERIAL: "s0", VENDOR_EXAMPLE_GPU: "g0" },
      mounts: [],
      devices: [
        { containerPath: "/dev/s0", hostPath: "/dev/s0", permissions: "rw" },
        { containerPath: "/dev/g0", hostPath: "/dev/g0", permissions: "rw" },
      ],
      annotations: {},
      cdiDevices: ["vendor.example/gpu=0"],
    });
    expect(serial.preStartCalls).toEqual([["s0"]]);
    expect(gpu.preStartCalls).toEqual([]);
    const plain = pod.spec.containers[1] as (typeof pod.spec.containers)[0];
    expect(await h.manager.containerOptions(pod, plain)).toBeUndefined();
  });

  test("refuses to start a container whose plugin requires PreStartContainer and is gone", async () => {
    const h = harness();
    const ep = serve(h.manager, ["s0"], SERIAL, { preStartRequired: true });
    const pod = podWith("a", 1);
    h.active = [pod];
    await h.manager.prepare(pod);
    ep.end();
    const app = pod.spec.containers[0] as (typeof pod.spec.containers)[0];
    await expect(h.manager.containerOptions(pod, app)).rejects.toThrow(
      `the device plugin of ${SERIAL} is not registered`,
    );
  });

  test("starts a container whose plugin is gone but needs no PreStartContainer", async () => {
    const h = harness();
    const ep = serve(h.manager, ["s0"]);
    const pod = podWith("a", 1);
    h.active = [pod];
    await h.manager.prepare(pod);
    ep.end();
    const app = pod.spec.containers[0] as (typeof pod.spec.containers)[0];
    expect((await h.manager.containerOptions(pod, app))?.envs).toEqual({
      FLEETLET_IO_SERIAL: "s0",
    });
  });
});
