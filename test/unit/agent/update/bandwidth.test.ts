import { describe, expect, test } from "bun:test";
import { TokenBucket } from "../../../../src/agent/update/bandwidth.ts";
import { FakeClock } from "../../../../src/util/clock.ts";

describe("TokenBucket", () => {
  test("lets a burst through at once, then charges the debt at the rate", () => {
    const clock = new FakeClock();
    const b = new TokenBucket(1000, clock, 100);
    expect(b.reserve(100)).toBe(0);
    expect(b.reserve(500)).toBe(500);
    clock.step(500);
    expect(b.reserve(0)).toBe(0);
    expect(b.reserve(1)).toBe(1);
  });

  test("refills at the rate up to its size, never more after an idle spell", () => {
    const clock = new FakeClock();
    const b = new TokenBucket(1000, clock, 100);
    b.reserve(100);
    clock.step(50);
    expect(b.reserve(50)).toBe(0);
    clock.step(60_000);
    expect(b.reserve(100)).toBe(0);
    expect(b.reserve(10)).toBe(10);
  });

  test("over many chunks the time charged is (bytes - burst) / rate, whatever the chunk size", () => {
    for (const chunk of [1, 1000, 16_384, 65_536, 300_000]) {
      const clock = new FakeClock();
      const b = new TokenBucket(100_000, clock);
      const t0 = clock.monotonic();
      for (let sent = 0; sent < 1_000_000; sent += chunk) clock.step(b.reserve(chunk));
      const bytes = Math.ceil(1_000_000 / chunk) * chunk;
      const expected = ((bytes - 100_000 / 8) / 100_000) * 1000;
      expect(Math.abs(clock.monotonic() - t0 - expected)).toBeLessThanOrEqual(
        Math.ceil(bytes / chunk),
      );
    }
  });

  test("take() resolves only when the clock has moved past the debt, and rejects on abort", async () => {
    const clock = new FakeClock();
    const b = new TokenBucket(1000, clock, 1);
    let done = false;
    const p = b.take(101).then(() => {
      done = true;
    });
    await Bun.sleep(0);
    clock.step(99);
    await Bun.sleep(0);
    expect(done).toBe(false);
    clock.step(1);
    await p;
    expect(done).toBe(true);
    const ac = new AbortController();
    const q = b.take(1000, ac.signal);
    ac.abort(new Error("stop"));
    await expect(q).rejects.toThrow("stop");
  });

  test("refuses a rate of 0 or less", () => {
    expect(() => new TokenBucket(0, new FakeClock())).toThrow("above 0");
  });
});
