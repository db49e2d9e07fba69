import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, loadAgentConfig } from "../../../src/agent/config/index.ts";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "fleetlet-devices-config-"));
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
    expect((err as Error).message).not.toContain("\n");
    return (err as Error).message;
  }
  throw new Error("expected a ConfigError");
}

describe("device manager settings in the agent config", () => {
  test("default to the kubelet's device plugin folder, 5 min of waiting, 30 s calls, no host devices", async () => {
    const c = await loadAgentConfig([], {}, deps);
    expect(c.devicePluginPath).toBe("/var/lib/kubelet/device-plugins");
    expect(c.devicePluginWaitTimeout).toBe(300_000);
    expect(c.devicePluginCallTimeout).toBe(30_000);
    expect(c.hostDevices).toEqual([]);
  });

  test("reads every field from the file; podsPerDevice defaults to 1", async () => {
    const { load } = await fromFile(
      [
        "devicePluginPath: /run/plugins",
        "devicePluginWaitTimeout: 10m",
        "devicePluginCallTimeout: 5s",
        "hostDevices:",
        "  - name: fleetlet.io/serial",
        '    paths: ["/dev/ttyUSB*", "/dev/serial/by-id/*"]',
        "  - name: example.com/video",
        '    paths: ["/dev/video[0-3]", "/dev/bus/usb/*/*"]',
        "    podsPerDevice: 4",
      ].join("\n"),
    );
    const c = await load();
    expect(c.devicePluginPath).toBe("/run/plugins");
    expect(c.devicePluginWaitTimeout).toBe(600_000);
    expect(c.devicePluginCallTimeout).toBe(5_000);
    expect(c.hostDevices).toEqual([
      {
        name: "fleetlet.io/serial",
        paths: ["/dev/ttyUSB*", "/dev/serial/by-id/*"],
        podsPerDevice: 1,
      },
      {
        name: "example.com/video",
        paths: ["/dev/video[0-3]", "/dev/bus/usb/*/*"],
        podsPerDevice: 4,
      },
    ]);
  });

  test("a relative devicePluginPath in the file is relative to the file's folder", async () => {
    const { load } = await fromFile("devicePluginPath: plugins");
    expect((await load()).devicePluginPath).toBe(join(dir, "plugins"));
  });

  test("takes flags for the plugin folder and the timeouts, winning over the file", async () => {
    const { file } = await fromFile("devicePluginPath: /run/plugins\ndevicePluginCallTimeout: 5s");
    const c = await loadAgentConfig(
      [
        "--config",
        file,
        "--device-plugin-path",
        "/srv/device-plugins",
        "--device-plugin-wait-timeout=1m",
        "--device-plugin-call-timeout=10s",
      ],
      {},
      deps,
    );
    expect(c.devicePluginPath).toBe("/srv/device-plugins");
    expect(c.devicePluginWaitTimeout).toBe(60_000);
    expect(c.devicePluginCallTimeout).toBe(10_000);
  });

  const group = (lines: string[]) => ["hostDevices:", ...lines].join("\n");
  const fileCases: [string, string][] = [
    ["devicePluginPath: ''", 'devicePluginPath: "" must not be empty'],
    ["devicePluginWaitTimeout: 0s", 'devicePluginWaitTimeout: "0s" must be greater than 0'],
    ["devicePluginCallTimeout: soon", 'devicePluginCallTimeout: "soon" is not a duration'],
    [
      "hostDevices: {name: a.io/x}",
      'hostDevices: {"name":"a.io/x"} must be a list of device groups (name, paths, podsPerDevice)',
    ],
    [
      "hostDevices: [/dev/ttyUSB0]",
      'hostDevices.0: "/dev/ttyUSB0" must be a mapping with name, paths, podsPerDevice',
    ],
    [
      group(["  - name: serial", "    paths: [/dev/ttyUSB*]"]),
      'hostDevices.0.name: "serial" is not an extended resource name: it must be domain-prefixed and outside kubernetes.io',
    ],
    [
      group(["  - name: kubernetes.io/serial", "    paths: [/dev/ttyUSB*]"]),
      'hostDevices.0.name: "kubernetes.io/serial" is not an extended resource name',
    ],
    [
      group(["  - paths: [/dev/ttyUSB*]"]),
      "hostDevices.0.name: is required: the extended resource pods ask for",
    ],
    [group(["  - name: a.io/x"]), "hostDevices.0.paths: is required: the device paths"],
    [
      group(["  - name: a.io/x", "    paths: []"]),
      "hostDevices.0.paths: [] must list at least one path pattern",
    ],
    [
      group(["  - name: a.io/x", "    paths: /dev/ttyUSB*"]),
      'hostDevices.0.paths: "/dev/ttyUSB*" must be a list of absolute path patterns',
    ],
    [
      group(["  - name: a.io/x", "    paths: [/dev/ttyS0, dev/ttyUSB*]"]),
      'hostDevices.0.paths.1: "dev/ttyUSB*" must be an absolute path',
    ],
    [
      group(["  - name: a.io/x", "    paths: [/dev/../etc/*]"]),
      'hostDevices.0.paths.0: "/dev/../etc/*" must not have "." or ".." segments',
    ],
    [
      group(["  - name: a.io/x", "    paths: [/dev/**/tty*]"]),
      'hostDevices.0.paths.0: "/dev/**/tty*" must not contain "**"',
    ],
    [
      group(["  - name: a.io/x", "    paths: ['/dev/tty{S,USB}0']"]),
      'hostDevices.0.paths.0: "/dev/tty{S,USB}0" must not contain {, } or \\',
    ],
    [
      group(["  - name: a.io/x", "    paths: ['/dev/tty[0-9']"]),
      'hostDevices.0.paths.0: "/dev/tty[0-9" has a "[" without its "]"',
    ],
    [
      group(["  - name: a.io/x", "    paths: [/dev/]"]),
      'hostDevices.0.paths.0: "/dev/" must name device files, not end with "/"',
    ],
    [
      group(["  - name: a.io/x", "    paths: [/dev/ttyS0]", "    podsPerDevice: 0"]),
      "hostDevices.0.podsPerDevice: 0 must be at least 1",
    ],
    [
      group(["  - name: a.io/x", "    paths: [/dev/ttyS0]", "    podsPerDevice: 1.5"]),
      "hostDevices.0.podsPerDevice: 1.5 must be an integer",
    ],
    [
      group(["  - name: a.io/x", "    paths: [/dev/ttyS0]", "    podPerDevice: 2"]),
      'hostDevices.0.podPerDevice: unknown field (did you mean "hostDevices.0.podsPerDevice"?)',
    ],
    [
      group([
        "  - name: a.io/x",
        "    paths: [/dev/ttyS0]",
        "  - name: a.io/x",
        "    paths: [/dev/ttyS1]",
      ]),
      'hostDevices.1.name: "a.io/x" is the name of an earlier group: each group serves a resource of its own',
    ],
  ];
  for (const [yaml, expected] of fileCases) {
    test(`a clear error naming the field: ${yaml.replaceAll("\n", " ")}`, async () => {
      const { file, load } = await fromFile(yaml);
      const message = await errorOf(load);
      expect(message).toStartWith(`invalid agent config ${file}: `);
      expect(message).toContain(expected);
    });
  }

  test("a clear error naming the flag: --device-plugin-wait-timeout=never", async () => {
    expect(
      await errorOf(() => loadAgentConfig(["--device-plugin-wait-timeout=never"], {}, deps)),
    ).toBe(
      'invalid flag --device-plugin-wait-timeout: "never" is not a duration (e.g. "20s", "5m")',
    );
  });
});
