import { describe, expect, test } from "bun:test";
import { createImageManager } from "../../../src/agent/images/index.ts";
import type { PullFigures } from "../../../src/agent/images/progress.ts";
import { type PullProgressSource, PullWatch } from "../../../src/agent/images/pull-watch.ts";
import type { IngestStatus } from "../../../src/cri/containerd.ts";
import type { CallOptions, CriRuntime, PullImageRequest } from "../../../src/cri/index.ts";
import { abortReason, FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";
import { until } from "../../lib/until.ts";

const MiB = 1024 * 1024;
const layer = (offset: number): IngestStatus => ({
  ref: "layer-sha256:a",
  offset,
  total: 8 * MiB,
  expected: "",
});

/** Lets one interval pass and waits for the listing it brings. */
async function tick(clock: FakeClock, src: { reads: number }): Promise<void> {
  const reads = src.reads;
  clock.step(1000);
  await until("the next listing", () => src.reads > reads);
}

/** A source whose listing the test sets; counts the listings read. */
function source(deadlineMs: number) {
  const s = {
    listing: [] as IngestStatus[] | Error,
    reads: 0,
    intervalMs: 1000,
    deadlineMs,
    async listIngests(): Promise<IngestStatus[]> {
      s.reads++;
      if (s.listing instanceof Error) throw s.listing;
      return s.listing;
    },
  };
  return s satisfies PullProgressSource;
}

describe("PullWatch", () => {
  test("reports the figures each time they change and aborts `stalled` once no byte came for the deadline", async () => {
    const clock = new FakeClock();
    const src = source(5000);
    const seen: PullFigures[] = [];
    const watch = new PullWatch(src, clock, nullLogger, (f) => seen.push(f));
    const stop = new AbortController();
    expect(await watch.begin(stop.signal)).toBe(true);
    const running = watch.run(stop.signal);
    for (const offset of [0, MiB, MiB, 2 * MiB]) {
      src.listing = [layer(offset)];
      await tick(clock, src);
    }
    expect(seen.map((f) => f.done)).toEqual([0, MiB, 2 * MiB]);
    for (let i = 0; i < 4; i++) await tick(clock, src);
    expect(watch.stalled.aborted).toBe(false);
    await tick(clock, src);
    expect(watch.stalled.aborted).toBe(true);
    await running;
    expect(watch.figures()).toEqual({ done: 2 * MiB, total: 8 * MiB });
  });

  test("a listing that fails is neither progress nor a stall", async () => {
    const clock = new FakeClock();
    const src = source(3000);
    const watch = new PullWatch(src, clock, nullLogger, () => {});
    const stop = new AbortController();
    await watch.begin(stop.signal);
    const running = watch.run(stop.signal);
    src.listing = new Error("deadline exceeded");
    for (let i = 1; i <= 5; i++) await tick(clock, src);
    expect(watch.stalled.aborted).toBe(false);
    src.listing = [];
    await tick(clock, src);
    expect(watch.stalled.aborted).toBe(true);
    await running;
  });

  test("lists nothing once the pull is over, and never aborts with deadline 0", async () => {
    const clock = new FakeClock();
    const src = source(0);
    const watch = new PullWatch(src, clock, nullLogger, () => {});
    const stop = new AbortController();
    await watch.begin(stop.signal);
    const running = watch.run(stop.signal);
    for (let i = 0; i < 60; i++) await tick(clock, src);
    expect(watch.stalled.aborted).toBe(false);
    stop.abort();
    await running;
    const reads = src.reads;
    clock.step(10_000);
    expect(src.reads).toBe(reads);
  });

  test("a runtime that cannot list leaves the pull unwatched", async () => {
    const clock = new FakeClock();
    const src = source(1000);
    src.listing = new Error("unknown service containerd.services.content.v1.Content");
    const watch = new PullWatch(src, clock, nullLogger, () => {});
    const stop = new AbortController();
    expect(await watch.begin(stop.signal)).toBe(false);
    await watch.run(stop.signal);
    clock.step(10_000);
    expect(src.reads).toBe(1);
    expect(watch.stalled.aborted).toBe(false);
  });
});

/** An image manager over a runtime whose pulls run until the test ends them or their signal
 * aborts. */
function pulling(deadlineMs: number) {
  const clock = new FakeClock();
  const src = source(deadlineMs);
  const pulls: { image: string; finish: () => void }[] = [];
  const cri = {
    imageStatus: async () => ({ image: null }),
    pullImage: (req: PullImageRequest, opts: CallOptions = {}) =>
      new Promise((resolve, reject) => {
        const image = req.image?.image ?? "";
        pulls.push({ image, finish: () => resolve({ imageRef: `sha256:${image}` }) });
        opts.signal?.addEventListener("abort", () =>
          reject(abortReason(opts.signal as AbortSignal)),
        );
      }),
  } as unknown as CriRuntime;
  const events: string[] = [];
  const images = createImageManager({
    cri,
    clock,
    logger: nullLogger,
    recorder: (_pod, _type, reason, message) => events.push(`${reason}: ${message}`),
    backoff: { initialMs: 10_000, maxMs: 300_000 },
    pullProgress: src,
  });
  const messages: string[] = [];
  const ensure = () =>
    images.ensureImageExists(makePod({ name: "p" }), makeContainer({ image: "busybox" }), {
      onProgress: (m) => messages.push(m),
    });
  return { clock, src, pulls, events, messages, ensure };
}

describe("ensureImageExists with the runtime's downloads watched", () => {
  test("gives the pull's figures as the container's waiting message while it runs, and lists nothing after", async () => {
    const t = pulling(60_000);
    const result = t.ensure();
    await until("the pull to begin", () => t.pulls.length === 1);
    t.src.listing = [layer(0)];
    await tick(t.clock, t.src);
    t.src.listing = [layer(3 * MiB)];
    await tick(t.clock, t.src);
    expect(t.messages).toEqual([
      'Pulling image "busybox": 0 B of 8.0 MiB',
      'Pulling image "busybox": 3.0 MiB of 8.0 MiB',
    ]);
    t.pulls[0]?.finish();
    expect(await result).toEqual({ ok: true, imageRef: "sha256:docker.io/library/busybox:latest" });
    const reads = t.src.reads;
    t.clock.step(10_000);
    expect(t.src.reads).toBe(reads);
  });

  test("cancels a pull that wrote no byte for the deadline: ErrImagePull saying so, then back-off", async () => {
    const t = pulling(5000);
    t.src.listing = [layer(2 * MiB)];
    const result = t.ensure();
    let settled = false;
    void result.then(() => {
      settled = true;
    });
    await until("the pull to begin", () => t.pulls.length === 1);
    await tick(t.clock, t.src);
    t.src.listing = [layer(3 * MiB)];
    // The first listing sees the leftover move; the fifth after it sees 5 s without a byte.
    for (let i = 0; i < 5; i++) await tick(t.clock, t.src);
    await Bun.sleep(5);
    expect(settled).toBe(false);
    await tick(t.clock, t.src);
    const detail =
      "pull cancelled: no byte written for 5s (imagePullProgressDeadline); 3.0 MiB of 8.0 MiB written";
    expect(await result).toEqual({ ok: false, reason: "ErrImagePull", message: detail });
    expect(t.events).toContain(`Failed: Failed to pull image "busybox": ${detail}`);
    expect(await t.ensure()).toMatchObject({
      reason: "ImagePullBackOff",
      message: `Back-off pulling image "busybox": ErrImagePull: ${detail}`,
    });
  });
});
