// The agent's configuration: a YAML file (--config, or $FLEETLET_CONFIG) and flags for the same
// fields, flags winning, then defaults. Field names follow KubeletConfiguration. Relative paths
// in the file are relative to the file's folder (as kubelet does); in flags, to the working dir.

import { readFile as fsReadFile } from "node:fs/promises";
import { hostname as osHostname } from "node:os";
import { dirname, join, resolve } from "node:path";
import { parse as parseYaml } from "yaml";
import type { LogLevel } from "../../util/log.ts";
import { checkHubUrl, checkRelations } from "./agent-config-checks.ts";
import { type AgentConfigInput, checkAgentConfigInput, showValue } from "./agent-config-schema.ts";
import { ConfigError, flagForField, parseAgentFlags } from "./agent-flags.ts";
import type { HostDeviceGroupConfig } from "./devices-schema.ts";

export { ConfigError } from "./agent-flags.ts";
export type { HostDeviceGroupConfig } from "./devices-schema.ts";

/** The resolved configuration. Every duration is in milliseconds; every path is absolute. */
export interface AgentConfig {
  /** The config file that was read, if any. */
  configFile?: string;
  /** The folder of static pod manifests. */
  staticPodPath: string;
  rootDir: string;
  /** A CRI endpoint, "unix:///path". */
  containerRuntimeEndpoint: string;
  /** Lowercase DNS-1123 subdomain; static pod names end with `-<nodeName>`. */
  nodeName: string;
  /** Full re-list period of the manifest folder (ms). */
  fileCheckFrequency: number;
  /** Period of the sync loop's resync of every pod (ms). */
  syncFrequency: number;
  /** Period of housekeeping: cleanups of orphaned pods, volumes, dirs (ms). */
  housekeepingInterval: number;
  maxPods: number;
  podLogsDir: string;
  /** The unix socket of the agent's local API. */
  apiSocket: string;
  /** Deadline of each CRI call, except pulls and exec streams (ms). */
  runtimeRequestTimeout: number;
  /** A docker config.json with registry credentials. */
  imagePullCredentialsFile?: string;
  /** RunPodSandbox, CreateContainer and StartContainer calls at once, the pods seen first going
   * first; 0 for no limit (the kubelet's way). Absent: the number of CPUs, at least 2. */
  maxParallelStarts?: number;
  logLevel: LogLevel;
  logFormat: "text" | "json";
  /** PLEG relist period (ms). */
  plegRelistPeriod: number;
  /** PLEG relist period while the runtime's container event stream flows (ms); events then
   * make it relist at once. 0: no event stream, relist every plegRelistPeriod. */
  plegEventedRelistPeriod: number;
  crashLoopBackOffBase: number;
  crashLoopBackOffMax: number;
  imagePullBackOffBase: number;
  imagePullBackOffMax: number;
  /** One image pull at a time, in the order asked (the kubelet's default, true). */
  serializeImagePulls: boolean;
  /** Pulls at once when serializeImagePulls is false; absent: no bound. */
  maxParallelImagePulls?: number;
  /** Pulls begun per second on average (a token bucket); 0 = no limit. */
  registryPullQPS: number;
  /** Pulls that may begin at once before registryPullQPS holds them back. */
  registryBurst: number;
  /** A pull whose download writes no further byte for this long is cancelled and fails with
   * ErrImagePull (ms); 0: never. */
  imagePullProgressDeadline: number;
  /** How often the node status is rebuilt (ms); kubelet's nodeStatusUpdateFrequency. */
  nodeStatusUpdateFrequency: number;
  /** Events the hub outbox keeps while disconnected; the oldest are dropped beyond it. */
  hubOutboxMaxEvents: number;
  /** Reconnect backoff to the hub: full jitter over min(max, base × 2^attempt) (ms). */
  hubReconnectBackOffBase: number;
  hubReconnectBackOffMax: number;
  nodeLabels: Record<string, string>;
  /** Sysctls a pod may set beyond the safe ones: names and "prefix*" patterns of namespaced
   * groups (kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*, net.*). */
  allowedUnsafeSysctls: string[];
  /** The cgroup under which "kubepods" is made (cgroupfs path; kubelet's default "/"). */
  cgroupRoot: string;
  /** Pods get QoS and pod cgroups; false leaves cgroups to the runtime. */
  cgroupsPerQOS: boolean;
  /** How pod and QoS cgroups are made: directly ("cgroupfs") or as systemd slices ("systemd");
   * it must be the runtime's (checked at start). */
  cgroupDriver: "cgroupfs" | "systemd";
  /** Resources kept for the OS (cpu, memory, ephemeral-storage, pid), as quantities. */
  systemReserved: Record<string, string>;
  /** Resources kept for the agent and the runtime. */
  kubeReserved: Record<string, string>;
  /** Hard eviction thresholds by signal ("memory.available": "100Mi", "nodefs.available": "10%"). */
  evictionHard: Record<string, string>;
  /** Soft eviction thresholds: they act once met for their evictionSoftGracePeriod. */
  evictionSoft: Record<string, string>;
  /** How long each soft threshold must hold before it acts (ms, by signal). */
  evictionSoftGracePeriod: Record<string, number>;
  /** How far above its threshold a signal must come back before pressure is over, by signal. */
  evictionMinimumReclaim: Record<string, string>;
  /** Caps a pod's grace period on soft evictions when > 0 (seconds). */
  evictionMaxPodGracePeriod: number;
  /** How long a pressure condition stays True after its last threshold was met (ms). */
  evictionPressureTransitionPeriod: number;
  /** Period of the eviction manager's monitoring cycle (ms); the kubelet's is fixed at 10 s. */
  evictionMonitoringPeriod: number;
  /** Memory PSI "some" avg10 at or above this percentage ("25%") counts as memory pressure. */
  evictionMemoryStall?: string;
  /** Most processes of one pod; -1 for no limit. */
  podPidsLimit: number;
  cpuManagerPolicy: "none" | "static";
  /** CPUs kept for the system under the static policy ("" = derived from reservations). */
  reservedSystemCPUs: string;
  /** The CPU manager's checkpoint (default <rootDir>/cpu_manager_state). */
  cpuManagerStateFile: string;
  /** The folder of image archives imported into the runtime (default <rootDir>/images). */
  imagesImportPath: string;
  /** Dead containers younger than this are kept (ms; 0 = no minimum). */
  minimumContainerTTLDuration: number;
  /** Dead instances kept per container of a pod (-1 = no limit). */
  maximumDeadContainersPerContainer: number;
  /** Dead containers kept on the node in all (-1 = no limit). */
  maximumDeadContainers: number;
  /** How often dead containers and sandboxes are collected (ms; the kubelet's is 1 min). */
  containerGCPeriod: number;
  /** How often unused images are collected (ms; the kubelet's is 5 min). */
  imageGCPeriod: number;
  /** Image filesystem usage (%) at or above which unused images are removed; 100 = never. */
  imageGCHighThresholdPercent: number;
  /** Usage (%) that image GC brings the image filesystem down to. */
  imageGCLowThresholdPercent: number;
  /** An image first seen more recently than this is not removed (ms). */
  imageMinimumGCAge: number;
  /** An unused image not used for this long is removed whatever the disk (ms; 0 = off). */
  imageMaximumGCAge: number;
  /** Images listed in Node.status.images, largest first (-1 = all). */
  nodeStatusMaxImages: number;
  /** A running container's log is rotated when it reaches this size (bytes). */
  containerLogMaxSize: number;
  /** Log files kept per container, the current one included (at least 2). */
  containerLogMaxFiles: number;
  /** How often container log sizes are checked (ms). */
  containerLogMonitorInterval: number;
  /** Release keys this device trusts for agent updates ("ed25519:…"); none: it takes none. */
  updatePublicKeys: string[];
  /** Bytes a second an agent update's download may take (0 = no limit). */
  updateBandwidthLimit: number;
  /** How often the device's health is read, and sent to the hub on a significant change (ms). */
  deviceHealthPeriod: number;
  /** A health report whose only change is counters and uptime waits this long at most (ms). */
  deviceHealthCountersPeriod: number;
  /** The device plugin folder: kubelet.sock, the plugins' sockets and the device checkpoint. */
  devicePluginPath: string;
  /** How long a pod waits for the plugin of a known resource to register before it fails (ms). */
  devicePluginWaitTimeout: number;
  /** Deadline of Allocate and GetPreferredAllocation calls to a plugin (ms). */
  devicePluginCallTimeout: number;
  /** Host device groups, served by the built-in plugin (docs/devices.md). */
  hostDevices: HostDeviceGroupConfig[];
  /** The fleet hub to join; absent when the agent runs alone. */
  hub?: {
    /** The hub's URLs (hub.url, --hub): the replicas of one hub, tried in a random order. */
    urls: string[];
    joinToken?: string;
    caFile?: string;
    /** Allows a plain ws:// or http:// hub URL that is not loopback (warned at every start). */
    insecure?: boolean;
    /** Streams (logs, exec, port-forward) the hub may run on this device at once (128). */
    maxStreams?: number;
  };
  /** What the hub's pods may do on this device (docs/deploy.md, "Device policy"). */
  hubPodPolicy: HubPodPolicy;
}

/** The device's limits on hub pods; the hub cannot change them. */
export interface HubPodPolicy {
  allowPrivileged: boolean;
  allowHostNetwork: boolean;
  allowHostPID: boolean;
  allowHostIPC: boolean;
  /** hostPath volumes must be under one of these; empty: no hostPath at all. */
  allowedHostPathPrefixes: string[];
  /** Image registries allowed; empty: any. */
  allowedRegistries: string[];
  /** Capabilities a container may add beyond the runtime's default set ("NET_ADMIN"; "ALL"). */
  allowedCapabilities: string[];
  /** Hub pods at most. */
  maxPods: number;
}

/** What loadAgentConfig reads from outside; each defaults to the real one. */
export interface AgentConfigDeps {
  hostname?: () => string;
  readFile?: (path: string) => Promise<string>;
  cwd?: string;
}

type Defaults = Omit<
  AgentConfig,
  | "configFile"
  | "imagePullCredentialsFile"
  | "hub"
  | "nodeName"
  | "cpuManagerStateFile"
  | "imagesImportPath"
  | "maxParallelStarts"
  | "maxParallelImagePulls"
  | "evictionMemoryStall"
>;

/** The defaults, as kubelet's where kubelet has the same setting. */
export const AGENT_CONFIG_DEFAULTS: Readonly<Defaults> = Object.freeze({
  staticPodPath: "/etc/fleetlet/manifests",
  rootDir: "/var/lib/fleetlet",
  containerRuntimeEndpoint: "unix:///run/containerd/containerd.sock",
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
  updatePublicKeys: [],
  updateBandwidthLimit: 0,
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

const pathFields = [
  "staticPodPath",
  "rootDir",
  "podLogsDir",
  "apiSocket",
  "imagePullCredentialsFile",
  "cpuManagerStateFile",
  "devicePluginPath",
  "imagesImportPath",
] as const;

/**
 * Reads the config file named by --config (else $FLEETLET_CONFIG; else none), applies the
 * flags over it and the defaults under both. Throws ConfigError, with a one-line message naming
 * the file or flag, the field and the value, for anything unusable.
 */
export async function loadAgentConfig(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  deps: AgentConfigDeps = {},
): Promise<AgentConfig> {
  const cwd = deps.cwd ?? process.cwd();
  const flags = parseAgentFlags(argv);
  const fromFlags = checkFlags(flags.fields, cwd);
  const configFile = flags.configFile ?? (env.FLEETLET_CONFIG || undefined);
  let fromFile: AgentConfigInput = {};
  let absFile: string | undefined;
  if (configFile !== undefined) {
    absFile = resolve(cwd, configFile);
    fromFile = await readConfigFile(absFile, deps.readFile ?? ((p) => fsReadFile(p, "utf8")));
  }
  const where = absFile === undefined ? "invalid agent config" : `invalid agent config ${absFile}`;
  const config = merge(fromFile, fromFlags, deps.hostname ?? osHostname, where);
  if (absFile !== undefined) config.configFile = absFile;
  checkRelations(config, where);
  return config;
}

async function readConfigFile(
  file: string,
  readFile: (path: string) => Promise<string>,
): Promise<AgentConfigInput> {
  let text: string;
  try {
    text = await readFile(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === "ENOENT" ? "no such file" : (err as Error).message;
    throw new ConfigError(`cannot read agent config ${file}: ${why}`);
  }
  let raw: unknown;
  try {
    raw = parseYaml(text, { maxAliasCount: 100 }) ?? {};
  } catch (err) {
    const first = (err as Error).message.split("\n")[0];
    throw new ConfigError(`invalid agent config ${file}: invalid YAML: ${first}`);
  }
  if (typeof raw !== "object" || Array.isArray(raw)) {
    throw new ConfigError(
      `invalid agent config ${file}: must be a YAML mapping of fields, got ${showValue(raw)}`,
    );
  }
  const checked = checkAgentConfigInput(raw);
  if (!checked.ok) {
    const { field, message } = checked.problem;
    throw new ConfigError(`invalid agent config ${file}: ${field ? `${field}: ` : ""}${message}`);
  }
  return resolvePaths(checked.value, dirname(file));
}

function checkFlags(fields: Record<string, unknown>, cwd: string): AgentConfigInput {
  const checked = checkAgentConfigInput(fields);
  if (!checked.ok) {
    const { field, message } = checked.problem;
    const top = field.split(".")[0] ?? field;
    const flag = flagForField(field) ?? flagForField(top) ?? field;
    throw new ConfigError(`invalid flag ${flag}: ${message}`);
  }
  return resolvePaths(checked.value, cwd);
}

function resolvePaths(input: AgentConfigInput, base: string): AgentConfigInput {
  const out: AgentConfigInput = { ...input };
  for (const f of pathFields) {
    const v = out[f];
    if (v !== undefined) out[f] = resolve(base, v);
  }
  if (out.hub?.caFile !== undefined)
    out.hub = { ...out.hub, caFile: resolve(base, out.hub.caFile) };
  return out;
}

function merge(
  file: AgentConfigInput,
  flags: AgentConfigInput,
  hostname: () => string,
  where: string,
): AgentConfig {
  const { hub: fileHub, hubPodPolicy: filePolicy, hostDevices = [], ...fileRest } = file;
  const { hub: flagHub, hubPodPolicy: _flagPolicy, ...flagRest } = flags;
  const config: AgentConfig = {
    ...AGENT_CONFIG_DEFAULTS,
    nodeLabels: {},
    allowedUnsafeSysctls: [],
    nodeName: "",
    cpuManagerStateFile: "",
    imagesImportPath: "",
    ...dropUndefined(fileRest),
    ...dropUndefined(flagRest),
    hostDevices: hostDevices.map((g) => ({ ...g, podsPerDevice: g.podsPerDevice ?? 1 })),
    hubPodPolicy: {
      ...AGENT_CONFIG_DEFAULTS.hubPodPolicy,
      ...dropUndefined(filePolicy ?? {}),
    },
  };
  if (config.cpuManagerStateFile === "")
    config.cpuManagerStateFile = join(config.rootDir, "cpu_manager_state");
  if (config.imagesImportPath === "") config.imagesImportPath = join(config.rootDir, "images");
  if (config.nodeName === "") config.nodeName = hostname().toLowerCase();
  const hub = { ...dropUndefined(fileHub ?? {}), ...dropUndefined(flagHub ?? {}) };
  if (Object.keys(hub).length > 0) {
    const { url, ...rest } = hub;
    if (url === undefined) {
      throw new ConfigError(
        `${where}: hub.url (--hub) is required when hub.joinToken or hub.caFile is set`,
      );
    }
    config.hub = { ...rest, urls: url };
    checkHubUrl(config.hub, where);
  }
  return config;
}

function dropUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
