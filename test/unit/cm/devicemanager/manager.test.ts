import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { readCheckpoint } from "../../../../src/agent/cm/devicemanager/checkpoint.ts";
import { makePod } from "../../../lib/builders.ts";
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

describe("DeviceManagerCore.admit()", () => {
  test("refuses a resource nobody serves with the kubelet's OutOf reason", () => {
    const { manager } = harness();
    expect(manager.admit(podWith("a", 2), [])).toEqual({
      reason: `OutOf${SERIAL}`,
      message: `Node didn't have enough resource: ${SERIAL}, requested: 2, used: 0, capacity: 0`,
    });
  });

  test("admits a pod without devices whatever is served", () => {
    const { manager } = harness();
    expect(manager.admit(makePod(), [])).toBeUndefined();
  });

  test("counts pods admitted before they allocate, so two in a row cannot share devices", () => {
    const h = harness();
    serve(h.manager, ["d0", "d1", "d2"]);
    const a = podWith("a", 2);
    expect(h.manager.admit(a, [])).toBeUndefined();
    expect(h.manager.admit(podWith("b", 2), [a])).toEqual({
      reason: "UnexpectedAdmissionError",
      message: `Allocate failed due to requested number of devices unavailable for ${SERIAL}. Requested: 2, Available: 1, which is unexpected`,
    });
    expect(h.manager.admit(podWith("c", 1), [a])).toBeUndefined();
  });

  test("counts devices held by active pods, not those of pods that are gone", async () => {
    const h = harness();
    serve(h.manager, ["d0", "d1", "d2"]);
    const a = podWith("a", 2);
    h.active = [a];
    expect(await h.manager.prepare(a)).toEqual({ state: "ready" });
    expect(h.manager.admit(podWith("b", 2), [a])?.message).toContain("Requested: 2, Available: 1");
    expect(h.manager.admit(podWith("b", 2), [])).toBeUndefined();
  });

  test("counts only healthy devices", () => {
    const h = harness();
    const ep = serve(h.manager, ["d0", "d1"]);
    ep.list([
      { id: "d0", healthy: true },
      { id: "d1", healthy: false },
    ]);
    expect(h.manager.admit(podWith("a", 2), [])?.message).toContain("Requested: 2, Available: 1");
  });

  test("admits a pod for a known resource whose plugin has not registered (prepare waits)", () => {
    const { manager } = harness({ knownResources: [SERIAL] });
    expect(manager.admit(podWith("a", 5), [])).toBeUndefined();
  });
});

describe("DeviceManagerCore.prepare()", () => {
  test("allocates per container, app containers reusing an init container's devices", async () => {
    const h = harness();
    const ep = serve(h.manager, ["d0", "d1", "d2", "d3"]);
    const pod = makePod({
      name: "p",
      initContainers: [withDevices("init", { [SERIAL]: 2 })],
      containers: [withDevices("a", { [SERIAL]: 1 }), withDevices("b", { [SERIAL]: 2 })],
    });
    h.active = [pod];
    const before = h.changes;
    expect(await h.manager.prepare(pod)).toEqual({ state: "ready" });
    expect(ep.allocateCalls).toEqual([["d0", "d1"], ["d0"], ["d1", "d2"]]);
    expect(h.manager.containerDevices(uid(pod), "b")).toEqual({ [SERIAL]: ["d1", "d2"] });
    expect(h.manager.stats().resources[0]?.allocated).toBe(3);
    expect(h.changes).toBeGreaterThan(before);
  });

  test("uses the plugin's preferred devices", async () => {
    const h = harness();
    const ep = serve(h.manager, ["d0", "d1", "d2", "d3"], SERIAL, {
      getPreferredAllocationAvailable: true,
    });
    const pod = podWith("a", 2);
    h.active = [pod];
    await h.manager.prepare(pod);
    expect(ep.preferredCalls).toEqual([
      { available: ["d0", "d1", "d2", "d3"], mustInclude: [], size: 2 },
    ]);
    expect(ep.allocateCalls).toEqual([["d2", "d3"]]);
  });

  test("ignores a preferred answer naming a device it cannot have, and logs it", async () => {
    const h = harness();
    const ep = serve(h.manager, ["d0", "d1", "d2"], SERIAL, {
      getPreferredAllocationAvailable: true,
    });
    const a = podWith("a", 1);
    const b = podWith("b", 2);
    h.active = [a, b];
    await h.manager.prepare(a);
    ep.prefer = () => ["d0", "d2"];
    expect(await h.manager.prepare(b)).toEqual({ state: "ready" });
    expect(ep.allocateCalls).toEqual([["d2"], ["d0", "d1"]]);
    expect(h.logs.some((l) => l.includes("Preferred allocation") && l.includes("d2"))).toBe(true);
  });

  test("never hands out a device twice when pods prepare at the same time", async () => {
    const h = harness();
    serve(h.manager, ["d0", "d1", "d2", "d3"]);
    const pods = [podWith("a", 2), podWith("b", 2)];
    h.active = pods;
    const results = await Promise.all(pods.map((p) => h.manager.prepare(p)));
    expect(results).toEqual([{ state: "ready" }, { state: "ready" }]);
    const held = pods.flatMap((p) => h.manager.containerDevices(uid(p), "app")[SERIAL] ?? []);
    expect(new Set(held).size).toBe(4);
  });

  test("waits for a known plugin, then allocates once it registers", async () => {
    const h = harness({ knownResources: [SERIAL] });
    const pod = podWith("a", 1);
    h.active = [pod];
    expect(await h.manager.prepare(pod)).toEqual({
      state: "waiting",
      reason: "DevicePluginNotRegistered",
      message: `waiting up to 5m0s for the device plugin of ${SERIAL} to register`,
    });
    const before = h.changes;
    const ep = serve(h.manager, ["d0"]);
    expect(h.changes).toBeGreaterThan(before);
    h.clock.step(4 * MIN);
    expect(await h.manager.prepare(pod)).toEqual({ state: "ready" });
    expect(ep.allocateCalls).toEqual([["d0"]]);
  });

  test("fails a waiting pod once the wait is over, and tells listeners when it is", async () => {
    const h = harness({ knownResources: [SERIAL], waitTimeoutMs: 2 * MIN });
    const pod = podWith("a", 1);
    h.active = [pod];
    expect((await h.manager.prepare(pod)).state).toBe("waiting");
    h.clock.step(2 * MIN - 1);
    h.manager.checkExpiry();
    const before = h.changes;
    expect((await h.manager.prepare(pod)).state).toBe("waiting");
    h.clock.step(1);
    h.manager.checkExpiry();
    expect(h.changes).toBe(before + 1);
    expect(await h.manager.prepare(pod)).toEqual({
      state: "failed",
      reason: "UnexpectedAdmissionError",
      message: `Allocate failed due to cannot allocate unregistered device ${SERIAL}, which is unexpected`,
    });
  });

  test("fails a pod asking for more healthy free devices than there are", async () => {
    const h = harness();
    serve(h.manager, ["d0"]);
    const pod = podWith("a", 2);
    h.active = [pod];
    expect(await h.manager.prepare(pod)).toEqual({
      state: "failed",
      reason: "UnexpectedAdmissionError",
      message: `Allocate failed due to requested number of devices unavailable for ${SERIAL}. Requested: 2, Available: 1, which is unexpected`,
    });
  });

  test("a failed Allocate fails the pod and leaves it holding nothing", async () => {
    const h = harness();
    const serial = serve(h.manager, ["s0", "s1"]);
    const gpu = serve(h.manager, ["g0"], GPU);
    gpu.answer = () => new Error("rpc error: the card is on fire");
    const pod = makePod({ name: "a", containers: [withDevices("app", { [SERIAL]: 1, [GPU]: 1 })] });
    h.active = [pod];
    expect(await h.manager.prepare(pod)).toEqual({
      state: "failed",
      reason: "UnexpectedAdmissionError",
      message: "Allocate failed due to rpc error: the card is on fire, which is unexpected",
    });
    expect(serial.allocateCalls).toHaveLength(1);
    expect(h.manager.containerDevices(uid(pod), "app")).toEqual({});
    expect(h.manager.stats()).toMatchObject({ allocations: 2, allocationFailures: 1 });
    expect(h.manager.stats().resources.map((r) => r.allocated)).toEqual([0, 0]);
    expect(readCheckpoint(dir.path).checkpoint.entries).toEqual([]);
  });

  test("a pod without devices is ready at once, even while a plugin hangs in Allocate", async () => {
    const h = harness();
    const ep = serve(h.manager, ["d0"]);
    ep.answer = () => new Promise(() => {});
    const stuck = podWith("a", 1);
    h.active = [stuck, makePod({ name: "plain" })];
    void h.manager.prepare(stuck);
    await until("Allocate to be called", () => ep.allocateCalls.length === 1);
    expect(await h.manager.prepare(makePod({ name: "plain" }))).toEqual({ state: "ready" });
  });

  test("frees the devices of pods no longer active before it allocates", async () => {
    const h = harness();
    serve(h.manager, ["d0"]);
    const a = podWith("a", 1);
    const b = podWith("b", 1);
    h.active = [a];
    await h.manager.prepare(a);
    h.active = [b];
    expect(await h.manager.prepare(b)).toEqual({ state: "ready" });
  });
});
