import { describe, expect, test } from "bun:test";
import type { SyncLoopDeps } from "../../../src/agent/sync-loop.ts";
import { createSyncLoop } from "../../../src/agent/sync-loop.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { createLogger } from "../../../src/util/log.ts";
import { makePod } from "../../lib/builders.ts";

/** A sync loop whose inputs never deliver anything, but whose PLEG input fails once. */
function loopWithFailingPLEG(logs: string[], clock: FakeClock) {
  let failures = 0;
  const never = (signal: AbortSignal) =>
    new Promise<never>((_, reject) =>
      signal.addEventListener("abort", () => reject(signal.reason), { once: true }),
    );
  const deps = {
    clock,
    logger: createLogger({ write: (line) => logs.push(line) }),
    podConfig: { updates: { next: never } },
    nextPLEGEvent: (signal: AbortSignal) =>
      failures++ === 0 ? Promise.reject(new Error("event stream broke")) : never(signal),
    housekeepingIntervalMs: 60_000,
    syncTickMs: 60_000,
  } as unknown as SyncLoopDeps;
  return { loop: createSyncLoop(deps), failures: () => failures };
}

describe("sync loop run()", () => {
  test("logs a failing input with what failed, pauses a second, and reads it again", async () => {
    const logs: string[] = [];
    const clock = new FakeClock();
    const { loop, failures } = loopWithFailingPLEG(logs, clock);
    const abort = new AbortController();
    const running = loop.run(abort.signal);
    await Bun.sleep(0);
    expect(failures()).toBe(1);
    expect(logs).toHaveLength(1);
    expect(logs[0]).toContain("reading the next PLEG event failed; trying again in 1 s");
    expect(logs[0]).toContain('error="event stream broke"');
    clock.step(999);
    await Bun.sleep(0);
    expect(failures()).toBe(1);
    clock.step(1);
    await Bun.sleep(0);
    expect(failures()).toBe(2);
    abort.abort();
    await running;
    expect(logs).toHaveLength(1);
  });
});

describe("sync loop admission", () => {
  test("a pod refused at admission is among pods() when its Failed status is published", () => {
    const seen: boolean[] = [];
    let loop: ReturnType<typeof createSyncLoop> | undefined;
    const deps = {
      clock: new FakeClock(),
      logger: createLogger({ write: () => {} }),
      maxPods: 110,
      workers: { state: () => "syncing", updatePod: () => {} },
      recorder: { event: () => {} },
      podSync: {
        reject: (pod: { metadata: { uid?: string } }) =>
          seen.push(loop?.pods().has(pod.metadata.uid ?? "") ?? false),
      },
      resources: {
        admit: () => ({ reason: "DevicePolicy", message: "refused" }),
        housekeeping: async () => {},
      },
    } as unknown as SyncLoopDeps;
    loop = createSyncLoop(deps);
    loop.handleConfigUpdate({ op: "ADD", source: "api", pods: [makePod({ name: "hub" })] });
    expect(seen).toEqual([true]);
  });
});
