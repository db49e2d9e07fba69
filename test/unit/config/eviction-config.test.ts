import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, loadAgentConfig } from "../../../src/agent/config/index.ts";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "fleetlet-eviction-config-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const deps = { hostname: () => "dev1", cwd: "/work" };

async function fromFile(yaml: string) {
  const file = join(dir, "config.yaml");
  await writeFile(file, yaml);
  return { file, load: () => loadAgentConfig(["--config", file], {}, deps) };
}

async function errorOf(load: () => Promise<unknown>): Promise<string> {
  try {
    await load();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error("expected a ConfigError");
}

describe("eviction settings in the agent config", () => {
  test("reads every field from the file, durations in ms", async () => {
    const { load } = await fromFile(
      [
        "evictionHard: {memory.available: 200Mi, pid.available: 1000}",
        "evictionSoft: {nodefs.available: 20%}",
        "evictionSoftGracePeriod: {nodefs.available: 1m30s}",
        "evictionMinimumReclaim: {nodefs.available: 1Gi}",
        "evictionMaxPodGracePeriod: 20",
        "evictionPressureTransitionPeriod: 0s",
        "evictionMonitoringPeriod: 500ms",
        "evictionMemoryStall: 25%",
      ].join("\n"),
    );
    const c = await load();
    expect(c.evictionHard).toEqual({ "memory.available": "200Mi", "pid.available": "1000" });
    expect(c.evictionSoft).toEqual({ "nodefs.available": "20%" });
    expect(c.evictionSoftGracePeriod).toEqual({ "nodefs.available": 90_000 });
    expect(c.evictionMinimumReclaim).toEqual({ "nodefs.available": "1Gi" });
    expect(c.evictionMaxPodGracePeriod).toBe(20);
    expect(c.evictionPressureTransitionPeriod).toBe(0);
    expect(c.evictionMonitoringPeriod).toBe(500);
    expect(c.evictionMemoryStall).toBe("25%");
  });

  test("takes the kubelet's flag syntax", async () => {
    const c = await loadAgentConfig(
      [
        "--eviction-hard=memory.available<1Gi,nodefs.inodesFree<10%",
        "--eviction-soft",
        "memory.available<2Gi",
        "--eviction-soft-grace-period=memory.available=30s",
        "--eviction-minimum-reclaim=memory.available=100Mi",
        "--eviction-max-pod-grace-period=-1",
        "--eviction-pressure-transition-period=2s",
      ],
      {},
      deps,
    );
    expect(c.evictionHard).toEqual({ "memory.available": "1Gi", "nodefs.inodesFree": "10%" });
    expect(c.evictionSoft).toEqual({ "memory.available": "2Gi" });
    expect(c.evictionSoftGracePeriod).toEqual({ "memory.available": 30_000 });
    expect(c.evictionMinimumReclaim).toEqual({ "memory.available": "100Mi" });
    expect(c.evictionMaxPodGracePeriod).toBe(-1);
    expect(c.evictionPressureTransitionPeriod).toBe(2000);
  });

  const fileCases: [string, string][] = [
    [
      "evictionHard: {memory.available: lots}",
      'evictionHard.memory.available: "lots" is not a quantity or a percentage',
    ],
    [
      "evictionHard: {memory.available: 0}",
      "evictionHard.memory.available: 0 must be greater than 0",
    ],
    [
      "evictionHard: {nodefs.available: 150%}",
      'evictionHard.nodefs.available: "150%" must be at most 100%',
    ],
    [
      "evictionHard: {nodefs.available: -5%}",
      'evictionHard.nodefs.available: "-5%" must not be negative',
    ],
    [
      "evictionHard: {nodefs.available: x%}",
      'evictionHard.nodefs.available: "x%" is not a percentage',
    ],
    [
      "evictionHard: {memory.free: 1Gi}",
      'evictionHard: "memory.free" is not an eviction signal (one of memory.available,',
    ],
    [
      "evictionHard: [memory.available]",
      'evictionHard: ["memory.available"] must be a map of signal to value',
    ],
    [
      "evictionSoft: {imagefs.available: 1e}",
      'evictionSoft.imagefs.available: "1e" is not a quantity or a percentage',
    ],
    [
      "evictionSoft: {memory.available: 1Gi}",
      "evictionSoftGracePeriod: a grace period must be given for the soft eviction threshold memory.available",
    ],
    [
      "evictionSoftGracePeriod: {memory.available: soon}",
      'evictionSoftGracePeriod.memory.available: "soon" is not a duration',
    ],
    [
      "evictionSoftGracePeriod: {memory.available: -1s}",
      'evictionSoftGracePeriod.memory.available: "-1s" must not be negative',
    ],
    [
      "evictionMinimumReclaim: {memory.available: 0%}",
      'evictionMinimumReclaim.memory.available: "0%" must be greater than 0%',
    ],
    [
      "evictionMinimumReclaim: {memory.available: -1Mi}",
      'evictionMinimumReclaim.memory.available: "-1Mi" must not be negative',
    ],
    [
      "evictionMaxPodGracePeriod: 1.5",
      "evictionMaxPodGracePeriod: 1.5 must be an integer (seconds)",
    ],
    [
      "evictionPressureTransitionPeriod: 5",
      "evictionPressureTransitionPeriod: 5 must be a duration string",
    ],
    [
      "evictionPressureTransitionPeriod: 5x",
      'evictionPressureTransitionPeriod: "5x" is not a duration',
    ],
    ["evictionMonitoringPeriod: 0s", 'evictionMonitoringPeriod: "0s" must be greater than 0'],
    [
      "evictionMemoryStall: 120%",
      'evictionMemoryStall: "120%" is not a percentage above 0% and at most 100%',
    ],
  ];
  for (const [yaml, expected] of fileCases) {
    test(`a clear error naming the field: ${yaml}`, async () => {
      const { file, load } = await fromFile(yaml);
      const message = await errorOf(load);
      expect(message).toStartWith(`invalid agent config ${file}: `);
      expect(message).toContain(expected);
    });
  }

  const flagCases: [string[], string][] = [
    [
      ["--eviction-hard=memory.available<lots"],
      'invalid flag --eviction-hard: "lots" is not a quantity or a percentage',
    ],
    [
      ["--eviction-hard=memory.available"],
      'invalid flag --eviction-hard: "" is not a quantity or a percentage',
    ],
    [
      ["--eviction-soft-grace-period=pid.available=1y"],
      'invalid flag --eviction-soft-grace-period: "1y" is not a duration',
    ],
    [
      ["--eviction-max-pod-grace-period=soon"],
      'invalid flag --eviction-max-pod-grace-period: "soon" must be an integer',
    ],
    [
      ["--eviction-soft=memory.available<1Gi"],
      "evictionSoftGracePeriod: a grace period must be given for the soft eviction threshold memory.available",
    ],
  ];
  for (const [argv, expected] of flagCases) {
    test(`a clear error naming the flag: ${argv.join(" ")}`, async () => {
      expect(await errorOf(() => loadAgentConfig(argv, {}, deps))).toContain(expected);
    });
  }
});
