// The chaos soak's short form (scripts/soak runs the long one): a fixed seed, a few minutes of
// manifest and DaemonSet changes with faults between them (the agent killed, containerd and the
// hub restarted, the hub away past the outbox's size, the root filesystem full, the clock
// stepped), and every invariant holding after each round.
import { describe, expect, test } from "bun:test";
import { runSoak } from "../lib/soak/run.ts";

const MINUTES = Number(process.env.FLEETLET_SOAK_MINUTES ?? "3");

describe("the chaos soak, short form (needs root, the test bed and libfaketime)", () => {
  test(
    "after every round of changes and faults, each wanted pod runs once, nothing else runs, nothing restarted without a reason, and the hub agrees",
    async () => {
      const lines: string[] = [];
      const report = await runSoak({
        seed: 30_030,
        durationMs: MINUTES * 60_000,
        limitMs: (MINUTES + 7) * 60_000,
        stepsPerRound: 8,
        settleMs: 120_000,
        maxFiles: 6,
        bounds: { rssBytes: 200 * 1024 * 1024, openFiles: 400 },
        log: (line) => lines.push(line),
      });
      if (report.violations.length > 0) console.log(lines.join("\n"));
      expect(report.violations).toEqual([]);
      expect(report.rounds).toBeGreaterThan(0);
      expect(report.checks).toBeGreaterThan(0);
    },
    (MINUTES + 9) * 60_000,
  );
});
