import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, loadAgentConfig } from "../../../src/agent/config/index.ts";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "fleetlet-config-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const deps = { hostname: () => "Pi-Kitchen", cwd: "/work" };

async function writeConfig(text: string): Promise<string> {
  const file = join(dir, "config.yaml");
  await writeFile(file, text);
  return file;
}

async function loadError(argv: string[], env: Record<string, string> = {}): Promise<string> {
  try {
    await loadAgentConfig(argv, env, deps);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    const message = (err as Error).message;
    expect(message).not.toContain("\n");
    return message;
  }
  throw new Error("expected loadAgentConfig() to throw");
}

describe("loadAgentConfig()", () => {
  test("uses kubelet's defaults and the lowercased hostname when nothing is given", async () => {
    const config = await loadAgentConfig([], {}, deps);
    expect(config).toEqual({
      staticPodPath: "/etc/fleetlet/manifests",
      rootDir: "/var/lib/fleetlet",
      containerRuntimeEndpoint: "unix:///run/containerd/containerd.sock",
      nodeName: "pi-kitchen",
      fileCheckFrequency: 20_000,
      syncFrequency: 60_000,
      housekeepingInterval: 2_000,
      maxPods: 110,
      podLogsDir: "/var/log/pods",
      apiSocket: "/run/fleetlet/agent.sock",
      runtimeRequestTimeout: 120_000,
      logLevel: "info",
      logFormat: "text",
      plegRelistPeriod: 1_000,
      plegEventedRelistPeriod: 60_000,
      crashLoopBackOffBase: 10_000,
      crashLoopBackOffMax: 300_000,
      imagePullBackOffBase: 10_000,
      imagePullBackOffMax: 300_000,
      serializeImagePulls: true,
      registryPullQPS: 5,
      registryBurst: 10,
      imagePullProgressDeadline: 300_000,
      nodeStatusUpdateFrequency: 10_000,
      hubOutboxMaxEvents: 1000,
      hubReconnectBackOffBase: 1_000,
      hubReconnectBackOffMax: 60_000,
      nodeLabels: {},
      allowedUnsafeSysctls: [],
      updatePublicKeys: [],
      updateBandwidthLimit: 0,
      cgroupRoot: "/",
      cgroupsPerQOS: true,
      cgroupDriver: "cgroupfs",
      systemReserved: {},
      kubeReserved: {},
      evictionHard: {
        "memory.available": "100Mi",
        "nodefs.available": "10%",
        "nodefs.inodesFree": "5%",
        "imagefs.available": "15%",
        "imagefs.inodesFree": "5%",
      },
      evictionSoft: {},
      evictionSoftGracePeriod: {},
      evictionMinimumReclaim: {},
      evictionMaxPodGracePeriod: 0,
      evictionPressureTransitionPeriod: 300_000,
      evictionMonitoringPeriod: 10_000,
      podPidsLimit: -1,
      cpuManagerPolicy: "none",
      reservedSystemCPUs: "",
      cpuManagerStateFile: "/var/lib/fleetlet/cpu_manager_state",
      imagesImportPath: "/var/lib/fleetlet/images",
      minimumContainerTTLDuration: 0,
      maximumDeadContainersPerContainer: 1,
      maximumDeadContainers: -1,
      containerGCPeriod: 60_000,
      imageGCPeriod: 300_000,
      imageGCHighThresholdPercent: 85,
      imageGCLowThresholdPercent: 80,
      imageMinimumGCAge: 120_000,
      imageMaximumGCAge: 0,
      nodeStatusMaxImages: 50,
      containerLogMaxSize: 10 * 1024 * 1024,
      containerLogMaxFiles: 5,
      containerLogMonitorInterval: 10_000,
      deviceHealthPeriod: 60_000,
      deviceHealthCountersPeriod: 600_000,
      devicePluginPath: "/var/lib/kubelet/device-plugins",
      devicePluginWaitTimeout: 300_000,
      devicePluginCallTimeout: 30_000,
      hostDevices: [],
      hubPodPolicy: {
        allowPrivileged: false,
        allowHostNetwork: false,
        allowHostPID: false,
        allowHostIPC: false,
        allowedHostPathPrefixes: [],
        allowedRegistries: [],
        allowedCapabilities: [],
        maxPods: 10,
      },
    });
  });

  test("reads the file, converts durations to ms and lets flags win over it", async () => {
    const file = await writeConfig(
      [
        "staticPodPath: /srv/manifests",
        "fileCheckFrequency: 5s",
        "syncFrequency: 1m30s",
        "maxPods: 20",
        "logLevel: debug",
        "nodeLabels: {site: kitchen}",
        "hub: {url: 'wss://hub.example.com', joinToken: abc}",
      ].join("\n"),
    );
    const config = await loadAgentConfig(
      ["--config", file, "--max-pods=30", "--file-check-frequency", "500ms", "--node-name", "dev1"],
      {},
      deps,
    );
    expect(config.configFile).toBe(file);
    expect(config.staticPodPath).toBe("/srv/manifests");
    expect(config.fileCheckFrequency).toBe(500);
    expect(config.syncFrequency).toBe(90_000);
    expect(config.maxPods).toBe(30);
    expect(config.nodeName).toBe("dev1");
    expect(config.logLevel).toBe("debug");
    expect(config.nodeLabels).toEqual({ site: "kitchen" });
    expect(config.hub).toEqual({ urls: ["wss://hub.example.com"], joinToken: "abc" });
  });

  test("maxParallelStarts: absent by default, 0 allowed, a flag wins over the file", async () => {
    const file = await writeConfig("maxParallelStarts: 0\n");
    expect((await loadAgentConfig(["--config", file], {}, deps)).maxParallelStarts).toBe(0);
    const both = await loadAgentConfig(["--config", file, "--max-parallel-starts", "3"], {}, deps);
    expect(both.maxParallelStarts).toBe(3);
    expect("maxParallelStarts" in (await loadAgentConfig([], {}, deps))).toBe(false);
  });

  test("reads the garbage collection and log rotation fields from the file and flags", async () => {
    const file = await writeConfig(
      [
        "imageGCHighThresholdPercent: 70",
        "imageGCLowThresholdPercent: 0",
        "imageMaximumGCAge: 168h",
        "imageMinimumGCAge: 0s",
        "maximumDeadContainers: 100",
        "containerLogMaxSize: 1Mi",
        "containerLogMonitorInterval: 500ms",
        "deviceHealthPeriod: 2s",
        "deviceHealthCountersPeriod: 1m",
      ].join("\n"),
    );
    const config = await loadAgentConfig(
      ["--config", file, "--maximum-dead-containers-per-container", "-1"],
      {},
      deps,
    );
    expect(config.imageGCHighThresholdPercent).toBe(70);
    expect(config.imageGCLowThresholdPercent).toBe(0);
    expect(config.imageMaximumGCAge).toBe(168 * 3600_000);
    expect(config.imageMinimumGCAge).toBe(0);
    expect(config.maximumDeadContainers).toBe(100);
    expect(config.maximumDeadContainersPerContainer).toBe(-1);
    expect(config.containerLogMaxSize).toBe(1024 * 1024);
    expect(config.containerLogMonitorInterval).toBe(500);
    expect(config.deviceHealthPeriod).toBe(2000);
    expect(config.deviceHealthCountersPeriod).toBe(60_000);
  });

  test("hubPodPolicy: fields of the file over the safe defaults, typos and relative paths refused", async () => {
    const file = await writeConfig(
      "hubPodPolicy:\n  allowHostNetwork: true\n  allowedHostPathPrefixes: [/data]\n  maxPods: 3\n",
    );
    const config = await loadAgentConfig(["--config", file], {}, deps);
    expect(config.hubPodPolicy).toEqual({
      allowPrivileged: false,
      allowHostNetwork: true,
      allowHostPID: false,
      allowHostIPC: false,
      allowedHostPathPrefixes: ["/data"],
      allowedRegistries: [],
      allowedCapabilities: [],
      maxPods: 3,
    });
    await writeConfig("hubPodPolicy:\n  allowPrivilege: true\n");
    expect(await loadError(["--config", file])).toContain(
      'hubPodPolicy.allowPrivilege: unknown field (did you mean "hubPodPolicy.allowPrivileged"?)',
    );
    await writeConfig("hubPodPolicy:\n  allowedHostPathPrefixes: [data]\n");
    expect(await loadError(["--config", file])).toContain(
      'hubPodPolicy.allowedHostPathPrefixes.0: "data" must be an absolute path',
    );
  });

  test("allowedUnsafeSysctls: names and prefix* patterns of namespaced groups from the file or the flag, others refused naming the field and value", async () => {
    const file = await writeConfig(
      'allowedUnsafeSysctls: ["kernel.msg*", "net/core/somaxconn", kernel.sem]\n',
    );
    expect((await loadAgentConfig(["--config", file], {}, deps)).allowedUnsafeSysctls).toEqual([
      "kernel.msg*",
      "net/core/somaxconn",
      "kernel.sem",
    ]);
    const flag = ["--config", file, "--allowed-unsafe-sysctls", "fs.mqueue.*, net.*"];
    expect((await loadAgentConfig(flag, {}, deps)).allowedUnsafeSysctls).toEqual([
      "fs.mqueue.*",
      "net.*",
    ]);
    await writeConfig('allowedUnsafeSysctls: ["kernel.msg*", "vm.swappiness"]\n');
    expect(await loadError(["--config", file])).toBe(
      `invalid agent config ${file}: allowedUnsafeSysctls.1: "vm.swappiness" is not known to be namespaced: only kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.* and net.* can be allowed`,
    );
    await writeConfig('allowedUnsafeSysctls: ["kernel.*"]\n');
    expect(await loadError(["--config", file])).toContain(
      'allowedUnsafeSysctls.0: "kernel.*" is not known to be namespaced',
    );
    await writeConfig('allowedUnsafeSysctls: ["Net.Core.*"]\n');
    expect(await loadError(["--config", file])).toContain(
      'allowedUnsafeSysctls.0: "Net.Core.*" is not a sysctl name or a prefix ending in "*"',
    );
    await writeConfig("allowedUnsafeSysctls: kernel.msgmax\n");
    expect(await loadError(["--config", file])).toContain(
      'allowedUnsafeSysctls: "kernel.msgmax" must be a list of sysctl names or patterns',
    );
    expect(await loadError(["--allowed-unsafe-sysctls", "net.*,kernel.panic"])).toBe(
      'invalid flag --allowed-unsafe-sysctls: "kernel.panic" is not known to be namespaced: only kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.* and net.* can be allowed',
    );
  });

  test("plegEventedRelistPeriod: 60 s by default, 0 turns the event stream off, a flag wins", async () => {
    expect((await loadAgentConfig([], {}, deps)).plegEventedRelistPeriod).toBe(60_000);
    const file = await writeConfig("plegEventedRelistPeriod: 0s\n");
    expect((await loadAgentConfig(["--config", file], {}, deps)).plegEventedRelistPeriod).toBe(0);
    const flag = ["--config", file, "--pleg-evented-relist-period", "5m"];
    expect((await loadAgentConfig(flag, {}, deps)).plegEventedRelistPeriod).toBe(300_000);
  });

  test("merges hub flags into the file's hub settings", async () => {
    const file = await writeConfig("hub:\n  url: https://hub.local\n  joinToken: old\n");
    const config = await loadAgentConfig(["--config", file, "--join-token", "new"], {}, deps);
    expect(config.hub).toEqual({ urls: ["https://hub.local"], joinToken: "new" });
  });

  test("refuses a plain hub URL that is not loopback unless hub.insecure says so", async () => {
    expect(await loadError(["--hub", "http://hub.example:7443"])).toContain(
      'hub.url "http://hub.example:7443" is not TLS and not loopback',
    );
    const plain = ["--hub", "ws://hub.example:7443", "--hub-insecure", "true"];
    expect((await loadAgentConfig(plain, {}, deps)).hub).toEqual({
      urls: ["ws://hub.example:7443"],
      insecure: true,
    });
    const loopback = await loadAgentConfig(["--hub", "http://127.0.0.1:7443"], {}, deps);
    expect(loopback.hub?.urls).toEqual(["http://127.0.0.1:7443"]);
    const streams = await loadAgentConfig(
      ["--hub", "https://h", "--hub-max-streams", "4"],
      {},
      deps,
    );
    expect(streams.hub?.maxStreams).toBe(4);
  });

  test("reads the file named by $FLEETLET_CONFIG when --config is absent", async () => {
    const file = await writeConfig("maxPods: 7\n");
    const config = await loadAgentConfig([], { FLEETLET_CONFIG: file }, deps);
    expect(config.maxPods).toBe(7);
  });

  test("resolves relative paths in the file against its folder, and in flags against cwd", async () => {
    const file = await writeConfig("staticPodPath: manifests\nrootDir: ../state\n");
    const config = await loadAgentConfig(["--config", file, "--pod-logs-dir", "logs"], {}, deps);
    expect(config.staticPodPath).toBe(join(dir, "manifests"));
    expect(config.rootDir).toBe(join(dir, "..", "state"));
    expect(config.podLogsDir).toBe("/work/logs");
  });

  test("accepts an empty file", async () => {
    const file = await writeConfig("# nothing yet\n");
    expect((await loadAgentConfig(["--config", file], {}, deps)).maxPods).toBe(110);
  });

  test("parses --node-labels as comma-separated key=value pairs", async () => {
    const config = await loadAgentConfig(["--node-labels", "a=1, zone=b"], {}, deps);
    expect(config.nodeLabels).toEqual({ a: "1", zone: "b" });
  });
});

describe("loadAgentConfig() errors", () => {
  const fileCases: [string, string, string][] = [
    [
      "a bad duration",
      "fileCheckFrequency: 20x",
      'fileCheckFrequency: "20x" is not a duration (e.g. "20s", "5m")',
    ],
    ["a duration as a number", "syncFrequency: 60", "syncFrequency: 60 must be a duration string"],
    ["a zero duration", "plegRelistPeriod: 0s", 'plegRelistPeriod: "0s" must be greater than 0'],
    [
      "a bad period that may be 0",
      "plegEventedRelistPeriod: soon",
      'plegEventedRelistPeriod: "soon" is not a duration',
    ],
    ["a string for an integer", "maxPods: lots", 'maxPods: "lots" must be an integer'],
    ["a fractional integer", "maxPods: 1.5", "maxPods: 1.5 must be an integer"],
    ["a zero count", "maxPods: 0", "maxPods: 0 must be at least 1"],
    ["a negative limit", "maxParallelStarts: -1", "maxParallelStarts: -1 must be 0 or more"],
    ["a number for a path", "rootDir: 5", "rootDir: 5 must be a string"],
    ["an empty path", 'rootDir: ""', 'rootDir: "" must not be empty'],
    ["an unknown log level", "logLevel: loud", 'logLevel: "loud" must be one of "debug"'],
    [
      "a tcp CRI endpoint",
      "containerRuntimeEndpoint: tcp://x:1",
      'containerRuntimeEndpoint: "tcp://x:1" must be "unix:///',
    ],
    ["an invalid node name", "nodeName: Dev_1", 'nodeName: "Dev_1" is not a valid node name'],
    ["an invalid hub url", "hub: {url: ftp://x}", 'hub.url: "ftp://x" must be a ws://, wss://'],
    ["a list for labels", "nodeLabels: [a]", 'nodeLabels: ["a"] must be a map of strings'],
    [
      "an invalid label value",
      "nodeLabels: {a: 'b c'}",
      'nodeLabels.a: "b c" is not a valid label',
    ],
    ["a list for the whole file", "- a", 'must be a YAML mapping of fields, got ["a"]'],
    ["invalid YAML", "a: [1", "invalid YAML: "],
    [
      "an unknown field",
      "staticPodPth: /x",
      'staticPodPth: unknown field (did you mean "staticPodPath"?)',
    ],
    [
      "an unknown hub field",
      "hub: {urll: 'wss://h'}",
      'hub.urll: unknown field (did you mean "hub.url"?)',
    ],
    ["a hub without url", "hub: {joinToken: t}", "hub.url (--hub) is required"],
    [
      "a back-off base above its max",
      "crashLoopBackOffBase: 10m",
      "crashLoopBackOffBase (600000ms) must not be greater than crashLoopBackOffMax (300000ms)",
    ],
    [
      "an image GC threshold above 100",
      "imageGCHighThresholdPercent: 101",
      "imageGCHighThresholdPercent: 101 must be between 0 and 100",
    ],
    [
      "a negative image GC threshold",
      "imageGCLowThresholdPercent: -5",
      "imageGCLowThresholdPercent: -5 must be between 0 and 100",
    ],
    [
      "a low image GC threshold above the high one",
      "imageGCHighThresholdPercent: 60\nimageGCLowThresholdPercent: 70",
      "imageGCLowThresholdPercent (70) must be less than imageGCHighThresholdPercent (60)",
    ],
    [
      "a low image GC threshold equal to the default high one",
      "imageGCLowThresholdPercent: 85",
      "imageGCLowThresholdPercent (85) must be less than imageGCHighThresholdPercent (85)",
    ],
    [
      "a negative image age",
      "imageMaximumGCAge: -1h",
      'imageMaximumGCAge: "-1h" must not be negative',
    ],
    [
      "a dead container limit below -1",
      "maximumDeadContainers: -2",
      "maximumDeadContainers: -2 must be -1 (no limit) or more",
    ],
    [
      "a maximum image age below the minimum one",
      "imageMaximumGCAge: 1m",
      "imageMaximumGCAge (60000ms) must be greater than imageMinimumGCAge (120000ms), or 0",
    ],
    ["a single log file", "containerLogMaxFiles: 1", "containerLogMaxFiles: 1 must be at least 2"],
    [
      "a log size that is not a quantity",
      "containerLogMaxSize: big",
      'containerLogMaxSize: "big" is not a quantity greater than 0',
    ],
    [
      "a zero log size",
      "containerLogMaxSize: 0",
      "containerLogMaxSize: 0 is not a quantity greater than 0",
    ],
    [
      "a zero log monitor interval",
      "containerLogMonitorInterval: 0s",
      'containerLogMonitorInterval: "0s" must be greater than 0',
    ],
    [
      "a device health period that is not a duration",
      "deviceHealthPeriod: 60",
      'deviceHealthPeriod: 60 must be a duration string (e.g. "20s", "5m")',
    ],
  ];
  for (const [what, yaml, expected] of fileCases) {
    test(`names the file, field and value for ${what}`, async () => {
      const file = await writeConfig(yaml);
      const message = await loadError(["--config", file]);
      expect(message).toStartWith(`invalid agent config`);
      expect(message).toContain(file);
      expect(message).toContain(expected);
    });
  }

  test("reports an unknown field before other problems in the file", async () => {
    const file = await writeConfig("maxPods: x\nsyncFrequncy: 1m\n");
    expect(await loadError(["--config", file])).toContain(
      'syncFrequncy: unknown field (did you mean "syncFrequency"?)',
    );
  });

  test("says the config file is missing", async () => {
    expect(await loadError(["--config", join(dir, "nope.yaml")])).toBe(
      `cannot read agent config ${join(dir, "nope.yaml")}: no such file`,
    );
  });

  const flagCases: [string[], string][] = [
    [
      ["--file-check-frequency", "20x"],
      'invalid flag --file-check-frequency: "20x" is not a duration (e.g. "20s", "5m")',
    ],
    [["--max-pods", "many"], 'invalid flag --max-pods: "many" must be an integer'],
    [["--max-parallel-starts", "-2"], "invalid flag --max-parallel-starts: -2 must be 0 or more"],
    [["--hub=ftp://x"], 'invalid flag --hub: "ftp://x" must be a ws://'],
    [["--static-pod-pth", "/x"], "unknown flag --static-pod-pth (did you mean --static-pod-path?)"],
    [["--node-name"], "flag --node-name needs a value"],
    [["extra"], 'unexpected argument "extra"'],
    [["--node-labels", "novalue"], 'invalid flag --node-labels: "novalue" is not key=value'],
    [
      ["--image-gc-high-threshold", "150"],
      "invalid flag --image-gc-high-threshold: 150 must be between 0 and 100",
    ],
    [
      ["--image-gc-low-threshold", "90"],
      "imageGCLowThresholdPercent (90) must be less than imageGCHighThresholdPercent (85)",
    ],
  ];
  for (const [argv, expected] of flagCases) {
    test(`names the flag and value for ${argv.join(" ")}`, async () => {
      expect(await loadError(argv)).toContain(expected);
    });
  }

  test("rejects a hostname that is not a valid node name, asking for --node-name", async () => {
    await expect(loadAgentConfig([], {}, { hostname: () => "my_host" })).rejects.toThrow(
      'nodeName: "my_host" is not a valid node name (set nodeName or --node-name)',
    );
  });
});
