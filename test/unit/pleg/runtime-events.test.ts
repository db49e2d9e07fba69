// The runtime event watch against the fake runtime and a fake clock: events reach the PLEG's
// side, the stream's opening and end are reported, a stream that ends is opened again after a
// jittered backoff, and a runtime without events ends the watch.
import { describe, expect, test } from "bun:test";
import { createRuntimeEventWatch } from "../../../src/agent/pleg/runtime-events.ts";
import { type ContainerEvent, createFakeRuntime } from "../../../src/cri/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";

const settle = () => new Promise((r) => setTimeout(r, 1));

function setup() {
  const clock = new FakeClock();
  const rt = createFakeRuntime({ now: () => clock.now() });
  const seen: ContainerEvent[] = [];
  const flowing: boolean[] = [];
  const watch = createRuntimeEventWatch({
    clock,
    logger: nullLogger,
    random: () => 0.5,
    subscribe: (h, s) => rt.containerEvents(h, s),
    onEvent: (e) => seen.push(e),
    onFlowing: (f) => flowing.push(f),
    backoffBaseMs: 100,
    backoffMaxMs: 1000,
  });
  return { clock, rt, seen, flowing, watch };
}

describe("runtime event watch", () => {
  test("hands on events and reports the stream open; aborting ends it", async () => {
    const { rt, seen, flowing, watch } = setup();
    const ac = new AbortController();
    const done = watch.run(ac.signal);
    await settle();
    expect(flowing).toEqual([true]);
    (rt as unknown as { emit(id: string, kind: string): void }).emit("c1", "exited");
    expect(seen).toEqual([{ containerId: "c1", kind: "exited" }]);
    ac.abort();
    await done;
    expect(flowing).toEqual([true, false]);
  });

  test("a stream that ends is opened again after a jittered backoff that grows while it fails", async () => {
    const { clock, rt, flowing } = setup();
    const ac = new AbortController();
    const opens: number[] = [];
    const t0 = clock.now();
    const counted = createRuntimeEventWatch({
      clock,
      logger: nullLogger,
      random: () => 0.5,
      subscribe: (h, s) => {
        opens.push(clock.now() - t0);
        rt.containerEvents(h, s);
      },
      onEvent: () => {},
      onFlowing: (f) => flowing.push(f),
      backoffBaseMs: 100,
      backoffMaxMs: 1000,
    });
    const done = counted.run(ac.signal);
    await settle();
    rt.setUnavailable(true); // ends the stream; the next ones fail at once
    for (const step of [50, 100, 200, 400, 500]) {
      await settle();
      clock.step(step);
    }
    await settle();
    // full jitter at 0.5: 50, 100, 200, 400, then capped at 1000 → 500
    expect(opens).toEqual([0, 50, 150, 350, 750, 1250]);
    rt.setUnavailable(false);
    clock.step(500);
    await settle();
    expect(opens).toEqual([0, 50, 150, 350, 750, 1250, 1750]);
    expect(flowing.at(-1)).toBe(true);
    ac.abort();
    await done;
  });

  test("a runtime that serves no events ends the watch (the PLEG keeps relisting)", async () => {
    const { rt, flowing, watch } = setup();
    rt.eventsUnimplemented = true;
    await watch.run(new AbortController().signal);
    expect(flowing).toEqual([]);
  });

  test("watchOnce() resolves with why the stream ended", async () => {
    const { rt, watch } = setup();
    const ended = watch.watchOnce(new AbortController().signal);
    await settle();
    rt.endEventStreams();
    expect((await ended).code).toBe("Unavailable");
  });
});
