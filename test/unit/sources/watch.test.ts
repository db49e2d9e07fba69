import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FolderWatcher } from "../../../src/agent/sources/watch.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "fleetlet-watch-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A watcher over a fake fs.watch whose events the test fires; records when it wakes. */
async function harness() {
  const clock = new FakeClock();
  let fire = () => {};
  const watcher = new FolderWatcher({
    path: dir,
    clock,
    log: nullLogger,
    quietMs: 5,
    maxDelayMs: 20,
    watchDir: (_dir, onChange) => {
      fire = onChange;
      return { close: () => {}, onError: () => {} };
    },
  });
  await watcher.sync();
  const wakes: number[] = [];
  const start = clock.now();
  const ac = new AbortController();
  const waitOnce = () =>
    watcher.waitForChange(60_000, ac.signal).then(() => wakes.push(clock.now() - start));
  return { clock, fire: () => fire(), wakes, waitOnce, close: () => ac.abort() };
}

const tick = () => new Promise((r) => setImmediate(r));

describe("FolderWatcher", () => {
  test("wakes once the folder has been quiet for quietMs after a burst of events", async () => {
    const h = await harness();
    const woken = h.waitOnce();
    for (let i = 0; i < 3; i++) {
      h.fire();
      h.clock.step(2);
    }
    await tick();
    expect(h.wakes).toEqual([]);
    h.clock.step(2);
    await tick();
    expect(h.wakes).toEqual([]);
    h.clock.step(1);
    await woken;
    // The last event came at 4 ms: quiet from 4 to 9 ms.
    expect(h.wakes).toEqual([9]);
    h.close();
  });

  test("wakes no later than maxDelayMs after the first event of a stream of events", async () => {
    const h = await harness();
    const woken = h.waitOnce();
    for (let i = 0; i < 12 && h.wakes.length === 0; i++) {
      h.fire();
      h.clock.step(2);
      await tick();
    }
    await woken;
    expect(h.wakes).toEqual([20]);
    h.close();
  });

  test("keeps a change that came while nobody waited for the next wait", async () => {
    const h = await harness();
    h.fire();
    h.clock.step(5);
    await h.waitOnce();
    expect(h.wakes).toEqual([5]);
    h.close();
  });
});
