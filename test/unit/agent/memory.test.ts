import { describe, expect, test } from "bun:test";
import { runMemoryTrim } from "../../../src/agent/memory/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";

const turn = () => new Promise((r) => setTimeout(r, 0));

describe("runMemoryTrim()", () => {
  test("collects once per period, and stops when the signal aborts", async () => {
    const clock = new FakeClock();
    const ac = new AbortController();
    let collections = 0;
    const done = runMemoryTrim(clock, ac.signal, 30_000, () => collections++);
    await turn();
    clock.step(29_999);
    await turn();
    expect(collections).toBe(0);
    clock.step(1);
    await turn();
    expect(collections).toBe(1);
    clock.step(30_000);
    await turn();
    clock.step(30_000);
    await turn();
    expect(collections).toBe(3);
    ac.abort();
    await done;
    clock.step(60_000);
    await turn();
    expect(collections).toBe(3);
  });
});
