// Properties of the agent config loader (the YAML file and the flags) under arbitrary and
// near-valid input: it gives a config, or a ConfigError whose one bounded line names the file or
// flag; it never throws anything else; every duration and count of a loaded config is a finite
// number.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import {
  type AgentConfig,
  agentFlagList,
  ConfigError,
  loadAgentConfig,
} from "../../../src/agent/config/index.ts";
import { fuzz, fuzzTimeout } from "../../lib/fuzz.ts";
import { arbitraryText, hostileYaml, nearValid, type Obj } from "../../lib/kube-arbitraries.ts";

const TIMEOUT = fuzzTimeout(60_000);
const FILE = "/etc/fleetlet/config.yaml";
const MAX_MESSAGE = 2048;

/** Loads a config from `text` as the file and `argv` as more flags. */
async function load(text: string | undefined, argv: string[] = []): Promise<AgentConfig | string> {
  const files = text === undefined ? [] : ["--config", FILE];
  try {
    return await loadAgentConfig(
      [...files, ...argv],
      {},
      {
        hostname: () => "dev1",
        cwd: "/work",
        readFile: async () => text ?? "",
      },
    );
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    expect(err.message).not.toContain("\n");
    expect(err.message.length).toBeLessThanOrEqual(MAX_MESSAGE);
    return err.message;
  }
}

/** Every number of a loaded config is finite; so is every number in its maps. */
function checkNumbers(v: unknown, path: string): void {
  if (typeof v === "number" && !Number.isFinite(v)) throw new Error(`${path} is ${v}`);
  if (v !== null && typeof v === "object")
    for (const [k, x] of Object.entries(v)) checkNumbers(x, `${path}.${k}`);
}

function checkLoaded(result: AgentConfig | string, where: string): void {
  if (typeof result === "string") {
    expect(
      result.startsWith(where) || /^(invalid|unknown|unexpected|flag|cannot)/.test(result),
    ).toBe(true);
    return;
  }
  checkNumbers(result, "config");
}

const duration = fc.oneof(
  fc.constantFrom("20s", "1m30s", "500ms", "1h", "0s", "2.5s"),
  fc
    .tuple(fc.integer({ min: 1, max: 100_000 }), fc.constantFrom("ms", "s", "m", "h"))
    .map(([n, u]) => `${n}${u}`),
);

/** A valid config file's fields (a selection of each kind of field). */
const validConfig: fc.Arbitrary<Obj> = fc.record(
  {
    staticPodPath: fc.constantFrom("/etc/fleetlet/manifests", "manifests"),
    rootDir: fc.constant("/var/lib/fleetlet"),
    nodeName: fc.constantFrom("dev1", "cam-7.site"),
    fileCheckFrequency: duration.filter((d) => d !== "0s"),
    syncFrequency: fc.constant("1m"),
    maxPods: fc.integer({ min: 1, max: 500 }),
    logLevel: fc.constantFrom("debug", "info", "warn", "error"),
    logFormat: fc.constantFrom("text", "json"),
    plegEventedRelistPeriod: duration,
    nodeLabels: fc.constant({ "fleetlet.io/site": "north", zone: "a" }),
    allowedUnsafeSysctls: fc.constant(["kernel.msg*", "net.core.somaxconn"]),
    evictionHard: fc.constant({ "memory.available": "50Mi", "nodefs.available": "5%" }),
    systemReserved: fc.constant({ cpu: "100m", memory: "128Mi" }),
    imageGCHighThresholdPercent: fc.constant(90),
    imageGCLowThresholdPercent: fc.constant(70),
    containerLogMaxSize: fc.constantFrom("10Mi", "1G"),
    hostDevices: fc.constant([{ name: "fleetlet.io/serial", paths: ["/dev/ttyUSB*"] }]),
    hubPodPolicy: fc.constant({ allowHostNetwork: true, allowedRegistries: ["docker.io"] }),
    hub: fc.constant({ url: "https://hub.example:8443", joinToken: "t0k" }),
  },
  { requiredKeys: [] },
);

/** Config texts that try YAML's corners on the loader: cycles, bombs, other documents. */
const hostileConfig = fc.oneof(
  hostileYaml,
  fc.constantFrom(
    "nodeLabels: &a {x: *a}\n",
    "hub: &h {url: *h}\n",
    "hostDevices: &d [{name: fleetlet.io/x, paths: *d}]\n",
    "evictionHard: &e {memory.available: *e}\n",
    "maxPods: 1\n---\nmaxPods: 2\n",
    "maxPods: 1e400\n",
    "maxPods: .nan\n",
    "fileCheckFrequency: 9999999999999999999999h\n",
    "syncFrequency: 720h\n",
    "__proto__: {maxPods: 0}\n",
    "constructor: 1\n",
    `nodeName: ${"a".repeat(100_000)}\n`,
    `nodeLabels: {${"k".repeat(50_000)}: v}\n`,
  ),
);

describe("loadAgentConfig under arbitrary input", () => {
  test(
    "gives a config or a one-line ConfigError for any file text",
    async () => {
      await fuzz(
        "agent-config.text",
        fc.oneof(arbitraryText, hostileConfig),
        async (text) => checkLoaded(await load(text), `invalid agent config ${FILE}`),
        { seed: 30_341, runs: 100 },
      );
    },
    TIMEOUT,
  );

  test(
    "loads every valid file, and near-valid ones give a config or an error naming the file",
    async () => {
      const { stringify } = await import("yaml");
      await fuzz(
        "agent-config.valid",
        validConfig,
        async (cfg) => {
          const result = await load(stringify(cfg));
          if (typeof result === "string") throw new Error(`a valid config was refused: ${result}`);
          checkNumbers(result, "config");
        },
        { seed: 30_342, runs: 60 },
      );
      await fuzz(
        "agent-config.near-valid",
        nearValid(validConfig.filter((c) => Object.keys(c).length > 0)),
        async (cfg) => checkLoaded(await load(stringify(cfg)), `invalid agent config ${FILE}`),
        { seed: 30_343, runs: 150 },
      );
    },
    TIMEOUT,
  );

  test(
    "gives a config or a ConfigError naming the flag for any flags",
    async () => {
      const flags = agentFlagList().map((f) => f.flag);
      const value = fc.oneof(
        fc.string({ maxLength: 12 }),
        fc.constantFrom(
          "0",
          "-1",
          "1",
          "20s",
          "1e400",
          "true",
          "a=b,c",
          "",
          "--x",
          "9".repeat(400),
        ),
      );
      const arg = fc.oneof(
        {
          weight: 6,
          arbitrary: fc.tuple(fc.constantFrom(...flags), value).map(([f, v]) => [f, v]),
        },
        fc.tuple(fc.constantFrom(...flags), value).map(([f, v]) => [`${f}=${v}`]),
        fc.string({ maxLength: 10 }).map((s) => [s]),
      );
      await fuzz(
        "agent-config.flags",
        fc.array(arg, { maxLength: 4 }),
        async (args) => checkLoaded(await load(undefined, args.flat()), "invalid agent config"),
        { seed: 30_344, runs: 400 },
      );
    },
    TIMEOUT,
  );
});
