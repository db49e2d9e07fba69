// PID pressure for real, and the eviction settings as a user meets them: a pod starting hundreds
// of sleeping processes crosses a pid.available threshold set relative to what this machine has
// at the test's start, and pods are evicted by priority; malformed thresholds stop the compiled
// agent with an error naming the field. Needs root and the test bed.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TestAgent } from "../lib/agent.ts";
import {
  conditionOf,
  eventsOf,
  evictionArgs,
  isEvictedAndStopped,
  isRunning,
  pidsAvailable,
  podManifest,
} from "../lib/eviction.ts";
import { eventually, fleetletBin } from "../lib/testbed.ts";

const agents: TestAgent[] = [];
afterAll(async () => {
  for (const a of agents) await a.cleanup();
}, 60_000);

describe("PID pressure (needs root and the test bed)", () => {
  test("pods are evicted by priority: the idle low-priority pod first, then the one starting processes", async () => {
    // The threshold sits 1500 tasks below what is free now (other work on this machine moves the
    // count by hundreds: a 110-pod run is ~1000 threads); the forker starts 2500 processes.
    const threshold = pidsAvailable() - 1500;
    const agent = new TestAgent({
      args: ["--eviction-hard", `pid.available<${threshold}`, ...evictionArgs("2s")],
    });
    agents.push(agent);
    await agent.start();
    agent.writeManifest(
      "idle.yaml",
      podManifest(agent, "idle", { priority: -10, script: "sleep 3600" }),
    );
    agent.writeManifest(
      "vip.yaml",
      podManifest(agent, "vip", { priority: 5000, script: "sleep 3600" }),
    );
    await agent.waitPod("idle", "Running", isRunning);
    await agent.waitPod("vip", "Running", isRunning);
    agent.writeManifest(
      "forker.yaml",
      podManifest(agent, "forker", {
        priority: 100,
        script: "i=0; while [ $i -lt 2500 ]; do sleep 3600 & i=$((i+1)); done; wait",
      }),
    );
    const idle = await agent.waitPod("idle", "evicted", isEvictedAndStopped, 40_000);
    const forker = await agent.waitPod("forker", "evicted", isEvictedAndStopped, 40_000);
    for (const f of ["idle.yaml", "forker.yaml"]) agent.removeManifest(f);
    const message = new RegExp(
      `^The node was low on resource: pids\\. Threshold quantity: ${threshold}, available: \\d+\\. $`,
    );
    expect(idle.status?.message).toMatch(message);
    expect(forker.status?.message).toMatch(message);
    const order = (await eventsOf(agent))
      .filter((e) => e.reason === "Evicted")
      .map((e) => e.involvedObject.name?.split("-")[0]);
    expect(order).toEqual(["idle", "forker"]);
    await eventually(
      "PIDPressure to be False",
      async () => (await conditionOf(agent, "PIDPressure")) === "False",
      20_000,
    );
    const vip = await agent.pod("vip");
    expect(vip && isRunning(vip)).toBe(true);
    expect(vip?.status?.containerStatuses?.[0]?.restartCount).toBe(0);
  }, 90_000);
});

describe("eviction settings as a user writes them (the compiled agent; no root needed)", () => {
  const run = (args: string[]) => {
    const p = Bun.spawnSync([fleetletBin, "agent", ...args], { stdout: "pipe", stderr: "pipe" });
    return { code: p.exitCode, stderr: p.stderr.toString().trim() };
  };

  const flagCases: [string[], string][] = [
    [
      ["--eviction-hard", "memory.available<lots"],
      'invalid flag --eviction-hard: "lots" is not a quantity or a percentage',
    ],
    [
      ["--eviction-hard", "nodefs.available<110%"],
      'invalid flag --eviction-hard: "110%" must be at most 100%',
    ],
    [
      ["--eviction-hard", "memory.free<1Gi"],
      'invalid flag --eviction-hard: "memory.free" is not an eviction signal',
    ],
    [
      ["--eviction-minimum-reclaim", "memory.available=-1Mi"],
      'invalid flag --eviction-minimum-reclaim: "-1Mi" must not be negative',
    ],
    [
      ["--eviction-soft", "memory.available<1Gi"],
      "evictionSoftGracePeriod: a grace period must be given for the soft eviction threshold memory.available",
    ],
    [
      ["--eviction-soft-grace-period", "memory.available=soon"],
      'invalid flag --eviction-soft-grace-period: "soon" is not a duration',
    ],
    [
      ["--eviction-memory-stall", "0%"],
      'invalid flag --eviction-memory-stall: "0%" is not a percentage above 0%',
    ],
  ];
  for (const [args, message] of flagCases) {
    test(`${args.join(" ")}: exit 2, naming the flag and the value`, () => {
      const r = run(args);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(message);
    });
  }

  test("a config file's malformed threshold names the file, the field, the signal and the value", () => {
    const dir = mkdtempSync(join(tmpdir(), "fleetlet-eviction-config-"));
    try {
      const file = join(dir, "config.yaml");
      writeFileSync(file, "evictionHard:\n  nodefs.inodesFree: 5 percent\n");
      const r = run(["--config", file]);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(
        `invalid agent config ${file}: evictionHard.nodefs.inodesFree: "5 percent" is not a quantity or a percentage`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
