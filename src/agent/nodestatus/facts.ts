// The node's static facts, gathered once at start: identity files (each with the fallbacks boards
// without systemd or DMI need), kernel and OS, hardware (node:os; the CPU model from `lscpu`
// where node:os names none or "unknown", as on ARM), and what the config says. Reading them never fails the agent: a fact that cannot be read is left empty
// and logged. (A hardware library did this before; it stayed in memory for the agent's whole
// life, 2.2 MB of RSS, for three facts: scripts/bench/README.md, agent-memory.)
import { readFile, statfs } from "node:fs/promises";
import { arch, cpus, hostname, release, totalmem } from "node:os";
import { dirname } from "node:path";
import { type Clock, realClock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";

/** What buildNode needs that does not change while the agent runs. */
export interface NodeFacts {
  nodeName: string;
  hostname: string;
  hostIP: string;
  machineID: string;
  systemUUID: string;
  bootID: string;
  kernelVersion: string;
  /** PRETTY_NAME of /etc/os-release. */
  osImage: string;
  /** "linux". */
  operatingSystem: string;
  /** GOARCH spelling: "amd64", "arm64", "arm". */
  architecture: string;
  /** "fleetlet/<version>". */
  kubeletVersion: string;
  cpuCores: number;
  cpuModel: string;
  memoryBytes: number;
  maxPods: number;
  /** Labels from the agent config (nodeLabels). */
  configLabels: Record<string, string>;
}

export interface GatherFactsInput {
  nodeName: string;
  hostIP: string;
  version: string;
  maxPods: number;
  configLabels: Record<string, string>;
  logger: Logger;
  /** Injected for tests; node:fs readFile by default. */
  readText?: (path: string) => Promise<string>;
  /** Injected for tests; node:os and lscpu by default. */
  hardware?: () => Promise<{ cores: number; model: string; memoryBytes: number }>;
  /** The hardware reading's 5 s timeout runs on it (default: the real clock). */
  clock?: Clock;
}

/** Node's process.arch → the GOARCH names Kubernetes labels use. */
export function goArch(nodeArch: string): string {
  const map: Record<string, string> = { x64: "amd64", arm64: "arm64", arm: "arm", ia32: "386" };
  return map[nodeArch] ?? nodeArch;
}

/** PRETTY_NAME from the text of /etc/os-release, unquoted; "Linux" when absent. */
export function prettyName(osRelease: string): string {
  for (const line of osRelease.split("\n")) {
    const m = /^PRETTY_NAME=(.*)$/.exec(line.trim());
    if (m?.[1] !== undefined) return m[1].replace(/^(["'])(.*)\1$/, "$2");
  }
  return "Linux";
}

/** The "Model name" in `lscpu`'s output ("Cortex-A72" on a Raspberry Pi 4), or "". */
export function lscpuModelName(output: string): string {
  const m = /^Model name:\s*(.+)$/m.exec(output);
  return m?.[1]?.trim() ?? "";
}

async function lscpu(): Promise<string> {
  const p = Bun.spawn(["lscpu"], { env: { ...process.env, LC_ALL: "C" }, stderr: "ignore" });
  const out = await new Response(p.stdout).text();
  return (await p.exited) === 0 ? out : "";
}

/** A CPU model as node:os reports it, or "" when it names none (Bun says "unknown" on arm64). */
function knownModel(model: string | undefined): string {
  const m = model?.trim() ?? "";
  return m.toLowerCase() === "unknown" ? "" : m;
}

/** The CPU model node:os reports, else the one `lscpu` prints (run only then), else "". */
export async function cpuModel(
  reported: string | undefined,
  runLscpu: () => Promise<string>,
): Promise<string> {
  const model = knownModel(reported);
  return model !== "" ? model : lscpuModelName(await runLscpu());
}

async function systemHardware(): Promise<{ cores: number; model: string; memoryBytes: number }> {
  const list = cpus();
  const model = await cpuModel(list[0]?.model, lscpu);
  return { cores: list.length || 1, model, memoryBytes: totalmem() };
}

/** Where each identity is read, first to last: the first file that reads non-empty wins. */
const IDENTITY_FILES = {
  /** dbus keeps its own copy on systems without systemd's. */
  machineID: ["/etc/machine-id", "/var/lib/dbus/machine-id"],
  /** DMI where the firmware has it (x86), else the device tree's serial number (ARM boards). */
  systemUUID: [
    "/sys/class/dmi/id/product_uuid",
    "/proc/device-tree/serial-number",
    "/sys/firmware/devicetree/base/serial-number",
  ],
} as const;

function withTimeout<T>(clock: Clock, p: Promise<T>, ms: number, what: string): Promise<T> {
  let cancel = () => {};
  const late = new Promise<never>((_, reject) => {
    cancel = clock.setTimer(ms, () => reject(new Error(`${what} did not answer within ${ms}ms`)));
  });
  return Promise.race([p, late]).finally(() => cancel());
}

/** Reads every static fact; each one that fails is logged and left at a safe value. */
export async function gatherNodeFacts(input: GatherFactsInput): Promise<NodeFacts> {
  const read = input.readText ?? ((p: string) => readFile(p, "utf8"));
  const log = input.logger;
  // Device-tree strings end in a NUL.
  const text = async (path: string, fallback = ""): Promise<string> => {
    try {
      return (await read(path)).replaceAll("\0", "").trim();
    } catch (err) {
      log.debug("cannot read node fact", { file: path, error: err });
      return fallback;
    }
  };
  const first = async (paths: readonly string[]): Promise<string> => {
    for (const p of paths) {
      const value = await text(p);
      if (value !== "") return value;
    }
    return "";
  };
  let hw = {
    cores: cpus().length || 1,
    model: knownModel(cpus()[0]?.model),
    memoryBytes: totalmem(),
  };
  try {
    hw = await withTimeout(
      input.clock ?? realClock,
      (input.hardware ?? systemHardware)(),
      5000,
      "reading the hardware",
    );
  } catch (err) {
    log.warn("cannot read hardware facts; using node:os", { error: err });
  }
  return {
    nodeName: input.nodeName,
    hostname: hostname(),
    hostIP: input.hostIP,
    machineID: await first(IDENTITY_FILES.machineID),
    systemUUID: await first(IDENTITY_FILES.systemUUID),
    bootID: await text("/proc/sys/kernel/random/boot_id"),
    kernelVersion: release(),
    osImage: prettyName(await text("/etc/os-release")),
    operatingSystem: "linux",
    architecture: goArch(arch()),
    kubeletVersion: `fleetlet/${input.version}`,
    cpuCores: hw.cores,
    cpuModel: hw.model,
    memoryBytes: hw.memoryBytes,
    maxPods: input.maxPods,
    configLabels: { ...input.configLabels },
  };
}

/**
 * Total bytes of the filesystem holding `path` (the agent's root dir), or of its nearest
 * existing parent; undefined when none can be read.
 */
export async function filesystemBytes(path: string): Promise<number | undefined> {
  let p = path;
  for (;;) {
    try {
      const st = await statfs(p);
      return st.blocks * st.bsize;
    } catch {
      const parent = dirname(p);
      if (parent === p) return undefined;
      p = parent;
    }
  }
}
