// Probe timing is kept on the monotonic clock: a step of the wall clock (NTP reaching a board that
// booted in 1970, an operator's date) neither fires probes early nor stops them.
import { describe, expect, test } from "bun:test";
import { flush, harness, podWith, probe, runningStatus } from "./fixtures.ts";

const DAY = 86_400_000;
const uid = (pod: { metadata: { uid?: string } }) => pod.metadata.uid as string;

/** Lets `ms` pass in 1 s steps, letting the workers run between them. */
async function pass(h: ReturnType<typeof harness>, ms: number) {
  for (let t = 0; t < ms; t += 1_000) {
    h.clock.step(1_000);
    await flush();
  }
}

describe("probe timing and wall-clock steps", () => {
  test.each([
    ["back", -DAY],
    ["forward", DAY],
  ])("a wall step %s of a day keeps a liveness probe at one per period", async (_d, step) => {
    const h = harness();
    const pod = podWith([{ name: "a", livenessProbe: probe({ periodSeconds: 10 }) }]);
    const ctl = new AbortController();
    const done = h.manager.run(ctl.signal);
    h.manager.updatePod(pod, runningStatus(pod, { a: "one" }, h.clock.now()));
    await pass(h, 30_000);
    const before = h.calls.length;
    h.clock.stepWall(step);
    await pass(h, 60_000);
    expect(h.calls.length - before).toBe(6);
    ctl.abort();
    await done;
  });

  test("initialDelaySeconds counts from when the container is seen, when its start time is after the agent's clock", async () => {
    const h = harness();
    h.clock.step(120_000); // past the start-up jitter window
    const pod = podWith([
      { name: "a", readinessProbe: probe({ periodSeconds: 1, initialDelaySeconds: 5 }) },
    ]);
    const ctl = new AbortController();
    const done = h.manager.run(ctl.signal);
    // The runtime's clock is 3 hours ahead of the agent's.
    h.manager.updatePod(pod, runningStatus(pod, { a: "one" }, h.clock.now() + 3 * 3_600_000));
    await pass(h, 4_000);
    expect(h.calls).toHaveLength(0);
    await pass(h, 2_000);
    expect(h.calls.length).toBeGreaterThan(0);
    expect(h.manager.readiness("one")).toBe(true);
    expect(h.manager.worker(uid(pod), "a", "readiness")).toBeDefined();
    ctl.abort();
    await done;
  });

  test("a wall step forward does not cut initialDelaySeconds short", async () => {
    const h = harness();
    h.clock.step(120_000);
    const pod = podWith([
      { name: "a", livenessProbe: probe({ periodSeconds: 1, initialDelaySeconds: 30 }) },
    ]);
    const ctl = new AbortController();
    const done = h.manager.run(ctl.signal);
    h.manager.updatePod(pod, runningStatus(pod, { a: "one" }, h.clock.now()));
    await pass(h, 2_000);
    h.clock.stepWall(DAY);
    await pass(h, 20_000);
    expect(h.calls).toHaveLength(0);
    await pass(h, 10_000);
    expect(h.calls.length).toBeGreaterThan(0);
    ctl.abort();
    await done;
  });
});
