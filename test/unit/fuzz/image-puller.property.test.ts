// Properties of the image puller (src/agent/images/puller.ts) under arbitrary settings and
// arbitrary interleavings of pulls asked for, pulls finishing, waits aborted and time passing:
// never more pulls in flight than the settings allow; serialized pulls begin in the order asked;
// a pull aborted while it waits never begins; the token bucket never lets more pulls begin in any
// span of time than its burst plus its rate over that span, and always lets one begin after a
// full token's time.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { createPuller, type PullSettings, TokenBucket } from "../../../src/agent/images/puller.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { fuzz, fuzzTimeout } from "../../lib/fuzz.ts";

const TIMEOUT = fuzzTimeout(30_000);

const settings: fc.Arbitrary<PullSettings> = fc.oneof(
  fc.record({
    serializeImagePulls: fc.constant(true),
    registryPullQPS: fc.integer({ min: 0, max: 20 }),
    registryBurst: fc.integer({ min: 1, max: 10 }),
  }),
  fc.record(
    {
      serializeImagePulls: fc.constant(false),
      maxParallelImagePulls: fc.integer({ min: 1, max: 5 }),
      registryPullQPS: fc.integer({ min: 0, max: 20 }),
      registryBurst: fc.integer({ min: 1, max: 10 }),
    },
    { requiredKeys: ["serializeImagePulls", "registryPullQPS", "registryBurst"] },
  ),
);

type Op =
  | { op: "ask" }
  | { op: "finish"; pick: number }
  | { op: "abort"; pick: number }
  | { op: "step"; ms: number };

const ops: fc.Arbitrary<Op[]> = fc.array(
  fc.oneof(
    { weight: 4, arbitrary: fc.constant<Op>({ op: "ask" }) },
    { weight: 3, arbitrary: fc.nat(50).map((pick): Op => ({ op: "finish", pick })) },
    { weight: 1, arbitrary: fc.nat(50).map((pick): Op => ({ op: "abort", pick })) },
    {
      weight: 2,
      arbitrary: fc.integer({ min: 0, max: 3000 }).map((ms): Op => ({ op: "step", ms })),
    },
  ),
  { maxLength: 60 },
);

const settle = () => new Promise((resolve) => setImmediate(resolve));

/** One pull asked for: whether it began, its finish function, its abort controller. */
interface Asked {
  id: number;
  began: boolean;
  done: boolean;
  finish?: () => void;
  abort: AbortController;
  aborted: boolean;
}

async function checkRun(s: PullSettings, steps: Op[]): Promise<void> {
  const clock = new FakeClock();
  const puller = createPuller(s, clock);
  const asked: Asked[] = [];
  const beganOrder: number[] = [];
  const limit = s.serializeImagePulls ? 1 : (s.maxParallelImagePulls ?? Number.POSITIVE_INFINITY);
  for (const step of steps) {
    if (step.op === "ask") {
      const a: Asked = {
        id: asked.length,
        began: false,
        done: false,
        abort: new AbortController(),
        aborted: false,
      };
      asked.push(a);
      puller
        .run(
          () =>
            new Promise<void>((resolve) => {
              if (a.aborted) throw new Error(`pull ${a.id} began after its wait was aborted`);
              a.began = true;
              beganOrder.push(a.id);
              a.finish = resolve;
            }),
          a.abort.signal,
        )
        .catch(() => {})
        .finally(() => {
          a.done = true;
        });
    } else if (step.op === "finish") {
      const running = asked.filter((a) => a.began && !a.done);
      running[step.pick % Math.max(1, running.length)]?.finish?.();
    } else if (step.op === "abort") {
      const waiting = asked.filter((a) => !a.began && !a.done);
      const a = waiting[step.pick % Math.max(1, waiting.length)];
      if (a) {
        a.aborted = true;
        a.abort.abort(new Error("pod deleted"));
      }
    } else {
      clock.step(step.ms);
    }
    await settle();
    const inFlight = asked.filter((a) => a.began && !a.done).length;
    if (inFlight > limit) throw new Error(`${inFlight} pulls in flight, limit ${limit}`);
  }
  if (s.serializeImagePulls) {
    const sorted = [...beganOrder].sort((x, y) => x - y);
    expect(beganOrder).toEqual(sorted);
  }
}

/** Accepted times of a bucket under arbitrary steps; checks both of its promises. */
function checkBucket(qps: number, burst: number, steps: number[]): void {
  const clock = new FakeClock();
  const bucket = new TokenBucket(qps, burst, clock);
  const accepted: number[] = [];
  for (const ms of steps) {
    clock.step(ms);
    const gotOne = bucket.tryAccept();
    if (gotOne) accepted.push(clock.monotonic());
    const full = accepted.length === 0 || clock.monotonic() - (accepted.at(-1) ?? 0) >= 1000 / qps;
    if (!gotOne && burst >= 1 && full)
      throw new Error(`refused after ${ms} ms with qps ${qps}, burst ${burst}`);
  }
  for (let i = 0; i < accepted.length; i++) {
    for (let j = i; j < accepted.length; j++) {
      const span = (accepted[j] ?? 0) - (accepted[i] ?? 0);
      const allowed = burst + (span * qps) / 1000 + 1e-9;
      if (j - i + 1 > allowed)
        throw new Error(`${j - i + 1} pulls began in ${span} ms (qps ${qps}, burst ${burst})`);
    }
  }
}

describe("image puller properties", () => {
  test(
    "never exceeds its bound, keeps serialized order, never begins an aborted wait",
    async () => {
      await fuzz(
        "image-puller.interleavings",
        fc.tuple(settings, ops),
        ([s, steps]) => checkRun(s, steps),
        { seed: 30_361, runs: 600 },
      );
    },
    TIMEOUT,
  );

  test(
    "the token bucket: at most burst + qps × span begin in any span, and one begins after a token's time",
    async () => {
      await fuzz(
        "image-puller.bucket",
        fc.tuple(
          fc.integer({ min: 1, max: 50 }),
          fc.integer({ min: 0, max: 20 }),
          fc.array(fc.integer({ min: 0, max: 2500 }), { maxLength: 80 }),
        ),
        ([qps, burst, steps]) => checkBucket(qps, burst, steps),
        { seed: 30_362, runs: 300 },
      );
    },
    TIMEOUT,
  );
});
