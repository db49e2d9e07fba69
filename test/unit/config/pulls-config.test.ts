import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, loadAgentConfig } from "../../../src/agent/config/index.ts";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "fleetlet-pulls-config-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const deps = { hostname: () => "dev1", cwd: "/work" };

async function load(argv: string[], yaml?: string) {
  if (yaml === undefined) return loadAgentConfig(argv, {}, deps);
  const file = join(dir, "config.yaml");
  await writeFile(file, yaml);
  return loadAgentConfig(["--config", file, ...argv], {}, deps);
}

async function errorOf(argv: string[], yaml?: string): Promise<string> {
  try {
    await load(argv, yaml);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error("expected a ConfigError");
}

const pullFields = (c: Awaited<ReturnType<typeof load>>) => ({
  serializeImagePulls: c.serializeImagePulls,
  maxParallelImagePulls: c.maxParallelImagePulls,
  registryPullQPS: c.registryPullQPS,
  registryBurst: c.registryBurst,
});

describe("image pull settings in the agent config", () => {
  test("default to the kubelet's: serialized, 5 pulls a second, bursts of 10", async () => {
    expect(pullFields(await load([]))).toEqual({
      serializeImagePulls: true,
      maxParallelImagePulls: undefined,
      registryPullQPS: 5,
      registryBurst: 10,
    });
  });

  test("are read from the file", async () => {
    const yaml =
      "serializeImagePulls: false\nmaxParallelImagePulls: 3\nregistryPullQPS: 0\nregistryBurst: 2\n";
    expect(pullFields(await load([], yaml))).toEqual({
      serializeImagePulls: false,
      maxParallelImagePulls: 3,
      registryPullQPS: 0,
      registryBurst: 2,
    });
  });

  test("are set by the kubelet's flags, which win over the file", async () => {
    const argv = [
      "--serialize-image-pulls=false",
      "--max-parallel-image-pulls",
      "2",
      "--registry-qps",
      "1",
      "--registry-burst=1",
    ];
    expect(pullFields(await load(argv, "registryPullQPS: 7\n"))).toEqual({
      serializeImagePulls: false,
      maxParallelImagePulls: 2,
      registryPullQPS: 1,
      registryBurst: 1,
    });
  });

  const refused: [string, string[], string | undefined, string][] = [
    [
      "a negative QPS flag",
      ["--registry-qps", "-1"],
      undefined,
      "invalid flag --registry-qps: -1 must not be a negative number",
    ],
    [
      "a negative burst",
      [],
      "registryBurst: -3\n",
      "registryBurst: -3 must not be a negative number",
    ],
    [
      "a QPS that is not an integer",
      [],
      "registryPullQPS: 0.5\n",
      "registryPullQPS: 0.5 must be an integer",
    ],
    [
      "maxParallelImagePulls 0",
      [],
      "serializeImagePulls: false\nmaxParallelImagePulls: 0\n",
      "maxParallelImagePulls: 0 must be a positive number",
    ],
    [
      "a serialize flag that is not a boolean",
      ["--serialize-image-pulls", "yes"],
      undefined,
      'invalid flag --serialize-image-pulls: "yes" must be true or false',
    ],
    [
      "maxParallelImagePulls above 1 while serialized",
      ["--max-parallel-image-pulls", "4"],
      undefined,
      "maxParallelImagePulls (4) cannot be larger than 1 unless serializeImagePulls (--serialize-image-pulls) is set to false",
    ],
    [
      "a burst of 0 with a QPS limit (no pull could ever begin)",
      ["--registry-burst", "0"],
      undefined,
      "registryBurst (--registry-burst) 0 with registryPullQPS (--registry-qps) 5 would refuse every pull",
    ],
  ];
  for (const [what, argv, yaml, expected] of refused) {
    test(`refuses ${what}, naming the field and value`, async () => {
      expect(await errorOf(argv, yaml)).toContain(expected);
    });
  }

  test("allows maxParallelImagePulls 1 while serialized, and burst 0 with no QPS limit", async () => {
    const c = await load([
      "--max-parallel-image-pulls",
      "1",
      "--registry-qps",
      "0",
      "--registry-burst",
      "0",
    ]);
    expect(pullFields(c)).toMatchObject({
      maxParallelImagePulls: 1,
      registryPullQPS: 0,
      registryBurst: 0,
    });
  });
});

describe("imagePullProgressDeadline in the agent config", () => {
  const table: [string, string[], string | undefined, number][] = [
    ["defaults to 5m", [], undefined, 300_000],
    ["is read from the file as a duration", [], "imagePullProgressDeadline: 90s\n", 90_000],
    [
      "is set by --image-pull-progress-deadline, over the file",
      ["--image-pull-progress-deadline", "2m"],
      "imagePullProgressDeadline: 90s\n",
      120_000,
    ],
    ["is 0 (never) with 0s", ["--image-pull-progress-deadline=0s"], undefined, 0],
  ];
  for (const [what, argv, yaml, ms] of table) {
    test(what, async () => {
      expect((await load(argv, yaml)).imagePullProgressDeadline).toBe(ms);
    });
  }

  test("refuses what is not a duration, naming the field and value", async () => {
    expect(await errorOf([], "imagePullProgressDeadline: soon\n")).toContain(
      'imagePullProgressDeadline: "soon" is not a duration',
    );
  });
});
