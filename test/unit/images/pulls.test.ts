import { describe, expect, test } from "bun:test";
import { createImageManager, type PullSettings } from "../../../src/agent/images/index.ts";
import { TokenBucket } from "../../../src/agent/images/puller.ts";
import type { Pod } from "../../../src/api/types.ts";
import { createFakeRuntime, type PullImageRequest } from "../../../src/cri/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";
import { until } from "../../lib/until.ts";

const A = "127.0.0.1:5055/a:v1";
const B = "127.0.0.1:5055/b:v1";
const C = "127.0.0.1:5055/c:v1";
const IMAGES: string[] = [A, B, C];

/** An image manager over the fake runtime whose pulls hang until the test lets them finish. */
function setup(pulls?: PullSettings) {
  const clock = new FakeClock();
  const cri = createFakeRuntime({ now: () => clock.now() });
  for (const image of IMAGES) cri.images.addToRegistry(image);
  const events: { pod: string; reason: string; message: string }[] = [];
  const images = createImageManager({
    cri,
    clock,
    logger: nullLogger,
    recorder: (pod, _type, reason, message) =>
      events.push({ pod: pod.metadata.name, reason, message }),
    backoff: { initialMs: 10_000, maxMs: 300_000 },
    ...(pulls && { pulls }),
  });
  /** Pulls in the runtime now, by image; each one's function lets it finish. */
  const inFlight = new Map<string, () => void>();
  let held = true;
  cri.setHook(async (method, request) => {
    if (method !== "pullImage" || !held) return;
    const image = (request as PullImageRequest).image?.image ?? "";
    await new Promise<void>((resolve) => inFlight.set(image, resolve));
    inFlight.delete(image);
  });
  const pulled = () =>
    (cri.callsOf("pullImage") as PullImageRequest[]).map((r) => r.image?.image ?? "");
  const ensure = (image: string, opts: { pod?: Pod; signal?: AbortSignal } = {}) =>
    images.ensureImageExists(
      opts.pod ?? makePod({ name: `p-${image.split("/")[1]?.[0]}` }),
      makeContainer({ image, imagePullPolicy: "Always" }),
      opts.signal ? { signal: opts.signal } : {},
    );
  const finish = (image: string) => {
    const release = inFlight.get(image);
    if (!release) throw new Error(`no pull of ${image} in flight`);
    release();
  };
  const stopHolding = () => {
    held = false;
  };
  return { clock, cri, events, ensure, finish, inFlight, pulled, stopHolding };
}

const serialized: PullSettings = {
  serializeImagePulls: true,
  registryPullQPS: 0,
  registryBurst: 0,
};
const parallel = (max?: number): PullSettings => ({
  serializeImagePulls: false,
  ...(max !== undefined && { maxParallelImagePulls: max }),
  registryPullQPS: 0,
  registryBurst: 0,
});

describe("image pulls serialized (serializeImagePulls: true)", () => {
  test("reach the runtime one at a time, in the order they were asked for", async () => {
    const s = setup(serialized);
    const results = IMAGES.map((image) => s.ensure(image));
    await until("the first pull in flight", () => s.inFlight.size === 1);
    expect(s.pulled()).toEqual([A]);
    s.finish(A);
    await until("the second pull in flight", () => s.inFlight.has(B));
    expect(s.pulled()).toEqual([A, B]);
    s.finish(B);
    await until("the third pull in flight", () => s.inFlight.has(C));
    s.finish(C);
    expect((await Promise.all(results)).map((r) => r.ok)).toEqual([true, true, true]);
    expect(s.pulled()).toEqual(IMAGES);
  });

  test("record Pulling when asked and a Pulled that counts the wait", async () => {
    const s = setup(serialized);
    const first = s.ensure(A);
    const second = s.ensure(B);
    await until("the first pull in flight", () => s.inFlight.size === 1);
    expect(s.events.map((e) => `${e.pod} ${e.reason}`)).toEqual(["p-a Pulling", "p-b Pulling"]);
    s.clock.step(5_250);
    s.finish(A);
    await first;
    await until("the second pull in flight", () => s.inFlight.size === 1);
    s.clock.step(1_500);
    s.finish(B);
    await second;
    const pulledEvents = s.events.filter((e) => e.reason === "Pulled").map((e) => e.message);
    expect(pulledEvents).toEqual([
      expect.stringMatching(/ in 5\.25s \(5\.25s including waiting\)\. Image size: \d+ bytes\.$/),
      expect.stringMatching(/ in 1\.5s \(6\.75s including waiting\)\. Image size: \d+ bytes\.$/),
    ]);
  });

  test("a pull whose signal aborts while it waits never reaches the runtime and is not backed off", async () => {
    const s = setup(serialized);
    const first = s.ensure(A);
    const abort = new AbortController();
    const queued = s.ensure(B, { signal: abort.signal });
    await until("the first pull in flight", () => s.inFlight.size === 1);
    abort.abort(new Error("pod deleted"));
    expect(await queued).toEqual({
      ok: false,
      reason: "ErrImagePull",
      message: `pull of image "${B}" cancelled while it waited for its turn: pod deleted`,
    });
    s.finish(A);
    expect((await first).ok).toBe(true);
    expect(s.pulled()).toEqual([A]);
    expect(s.events.map((e) => e.reason)).not.toContain("Failed");
    s.stopHolding();
    expect((await s.ensure(B)).ok).toBe(true);
  });

  test("are serialized when no settings are given", async () => {
    const s = setup();
    const results = IMAGES.map((image) => s.ensure(image));
    await until("the first pull in flight", () => s.inFlight.size === 1);
    for (const image of IMAGES) {
      await until(`${image} in flight`, () => s.inFlight.has(image));
      expect(s.inFlight.size).toBe(1);
      s.finish(image);
    }
    expect((await Promise.all(results)).every((r) => r.ok)).toBe(true);
  });
});

describe("image pulls in parallel (serializeImagePulls: false)", () => {
  test("maxParallelImagePulls 2: a third pull waits for a slot, then takes the freed one", async () => {
    const s = setup(parallel(2));
    const results = IMAGES.map((image) => s.ensure(image));
    await until("two pulls in flight", () => s.inFlight.size === 2);
    expect(s.pulled()).toEqual([A, B]);
    s.finish(B);
    await until("the third pull in flight", () => s.inFlight.has(C));
    expect(s.inFlight.size).toBe(2);
    s.finish(A);
    s.finish(C);
    expect((await Promise.all(results)).every((r) => r.ok)).toBe(true);
  });

  test("unbounded: a signal aborted before the pull is asked for never reaches the runtime", async () => {
    const s = setup(parallel());
    const r = await s.ensure(A, { signal: AbortSignal.abort() });
    expect(r).toMatchObject({ ok: false, reason: "ErrImagePull" });
    expect(s.pulled()).toEqual([]);
  });

  test("without maxParallelImagePulls every pull runs at once", async () => {
    const s = setup(parallel());
    const results = IMAGES.map((image) => s.ensure(image));
    await until("three pulls in flight", () => s.inFlight.size === 3);
    for (const image of IMAGES) s.finish(image);
    expect((await Promise.all(results)).every((r) => r.ok)).toBe(true);
  });
});

describe("registryPullQPS and registryBurst", () => {
  test("a pull the bucket refuses fails with the kubelet's error, backs off, then pulls", async () => {
    const s = setup({ serializeImagePulls: false, registryPullQPS: 1, registryBurst: 1 });
    s.stopHolding();
    const image = B;
    expect((await s.ensure(A)).ok).toBe(true);
    expect(await s.ensure(image)).toEqual({
      ok: false,
      reason: "ErrImagePull",
      message: "pull QPS exceeded",
    });
    expect(s.events.at(-1)).toMatchObject({
      reason: "Failed",
      message: `Failed to pull image "${image}": pull QPS exceeded`,
    });
    expect(s.pulled()).toEqual([A]);
    expect(await s.ensure(image)).toMatchObject({ ok: false, reason: "ImagePullBackOff" });
    s.clock.step(10_000);
    expect((await s.ensure(image)).ok).toBe(true);
    expect(s.pulled()).toEqual([A, image]);
  });

  test("registryPullQPS 0 is no limit", async () => {
    const s = setup({ serializeImagePulls: false, registryPullQPS: 0, registryBurst: 0 });
    s.stopHolding();
    for (let i = 0; i < 25; i++) expect((await s.ensure(IMAGES[i % 3] ?? A)).ok).toBe(true);
    expect(s.pulled()).toHaveLength(25);
  });

  test("a refused pull gives its serialized slot back at once", async () => {
    const s = setup({ serializeImagePulls: true, registryPullQPS: 1, registryBurst: 1 });
    s.stopHolding();
    expect((await s.ensure(A)).ok).toBe(true);
    expect(await s.ensure(B)).toMatchObject({ message: "pull QPS exceeded" });
    s.clock.step(1_000);
    expect((await s.ensure(C)).ok).toBe(true);
  });
});

describe("TokenBucket", () => {
  // [qps, burst, steps: ms to step before a tryAccept, expected answers]
  const cases: [string, number, number, number[], boolean[]][] = [
    ["starts full: burst 3 takes three at once", 5, 3, [0, 0, 0, 0], [true, true, true, false]],
    [
      "refills at qps: 2/s gives one every 500 ms",
      2,
      1,
      [0, 0, 499, 1],
      [true, false, false, true],
    ],
    [
      "never holds more than burst",
      10,
      2,
      [0, 0, 60_000, 0, 0, 0],
      [true, true, true, true, false, false],
    ],
    ["burst 0 never accepts", 5, 0, [0, 10_000], [false, false]],
    ["a fraction of a token counts toward the next", 3, 1, [0, 200, 200], [true, false, true]],
  ];
  for (const [what, qps, burst, steps, expected] of cases) {
    test(what, () => {
      const clock = new FakeClock();
      const bucket = new TokenBucket(qps, burst, clock);
      const answers = steps.map((ms) => {
        clock.step(ms);
        return bucket.tryAccept();
      });
      expect(answers).toEqual(expected);
    });
  }
});
