// Shared parts of the agent benchmarks: a host-network sleeper manifest, the same pod made
// through raw CRI calls, percentiles, and reading a process's CPU time and RSS from /proc.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { START_SLOT_RELEASE_MS } from "../../src/agent/kuberuntime/core.ts";
import type { ContainerConfig, CriClient, PodSandboxConfig } from "../../src/cri/index.ts";
import { realClock } from "../../src/util/clock.ts";
import { PriorityLimiter } from "../../src/util/priority-limiter.ts";

export const BENCH_LABEL = "io.fleetlet.bench-run";

/** The agent's own default timings, written out as flags (a TestAgent's are faster). */
export const DEFAULT_TIMING_FLAGS: readonly string[] = [
  "--sync-frequency",
  "60s",
  "--file-check-frequency",
  "20s",
  "--housekeeping-interval",
  "2s",
];

export { sleeperManifest } from "../../test/lib/manifests.ts";

/** The CRI configs the agent sent for one of its pods, to make raw pods from (see
 * agentConfigs). */
export interface ConfigTemplate {
  sandbox: PodSandboxConfig;
  container: ContainerConfig;
  /** The content of each file the container mounts (in the order of its mounts). */
  files: Buffer[];
}

/** JSON as containerd shows a config (Go field names) → our request shape (camelCase); the keys
 * of labels and annotations are kept as they are. */
function camelKeys(value: unknown, keep = false): unknown {
  if (Array.isArray(value)) return value.map((v) => camelKeys(v));
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [
      keep ? k : k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()),
      camelKeys(v, !keep && (k === "labels" || k === "annotations")),
    ]),
  );
}

/** The sandbox and container configs the agent sent for a pod, given its listed container,
 * read back from containerd (verbose statuses). */
export async function agentConfigs(
  cri: CriClient,
  listed: { id: string; podSandboxId: string },
): Promise<ConfigTemplate> {
  const c = await cri.containerStatus({ containerId: listed.id, verbose: true });
  const sb = await cri.podSandboxStatus({ podSandboxId: listed.podSandboxId, verbose: true });
  const config = (info: Record<string, string> | undefined) =>
    camelKeys(JSON.parse(info?.info ?? "{}").config);
  const container = config(c.info) as ContainerConfig;
  return {
    sandbox: config(sb.info) as PodSandboxConfig,
    container,
    files: (container.mounts ?? []).map((m) => readFileSync(m.hostPath)),
  };
}

/** RunPodSandbox + CreateContainer + StartContainer for one sleeper; returns the sandbox ID.
 * With `cgroupRoot`, the sandbox goes into `<cgroupRoot>/kubepods/besteffort/pod<uid>`, the
 * place the agent gives a best-effort pod, so that runc does the same cgroup work for both.
 * With `template` (the agent's configs for the same manifest), the calls carry the same configs
 * (DNS, mounts, resources, security context) under the raw pod's own name, labels and log
 * folder, mounting copies of the files (rawPodFiles, called before the calls are timed). */
export async function rawPod(
  cri: CriClient,
  runId: string,
  name: string,
  image: string,
  cgroupRoot?: string,
  template?: ConfigTemplate,
): Promise<string> {
  const uid = `${runId}-${name}`;
  const logDirectory = join(rawLogRoot(runId), name);
  const config: PodSandboxConfig = {
    ...template?.sandbox,
    metadata: { name, namespace: "bench", uid, attempt: 0 },
    hostname: "",
    logDirectory,
    labels: { [BENCH_LABEL]: runId },
    annotations: {},
    linux: {
      ...template?.sandbox.linux,
      securityContext: template?.sandbox.linux?.securityContext ?? {
        namespaceOptions: { network: "NODE", pid: "CONTAINER" },
      },
      ...(cgroupRoot && { cgroupParent: `${cgroupRoot}/kubepods/besteffort/pod${uid}` }),
    },
  };
  const { podSandboxId } = await cri.runPodSandbox({ config });
  const { containerId } = await cri.createContainer({
    podSandboxId,
    config: {
      ...template?.container,
      metadata: { name: "c", attempt: 0 },
      image: { image },
      command: ["sleep", "3600"],
      logPath: "c/0.log",
      labels: { [BENCH_LABEL]: runId },
      mounts: (template?.container.mounts ?? []).map((m, i) => ({
        ...m,
        hostPath: join(logDirectory, `mount-${i}`),
      })),
    },
    sandboxConfig: config,
  });
  await cri.startContainer({ containerId });
  return podSandboxId;
}

/** Start calls made the agent's way (maxParallelStarts): at most `limit` at once, a freed slot
 * going to the pod whose name sorts first (0: all at once). `forPod(name)` gives a client whose
 * RunPodSandbox, CreateContainer and StartContainer calls wait their turn. */
export function startQueue(cri: CriClient, limit: number): (name: string) => CriClient {
  const limiter = new PriorityLimiter(limit, realClock, START_SLOT_RELEASE_MS);
  return (name) => {
    const key = { at: 0, name };
    const limited: CriClient = Object.create(cri);
    limited.runPodSandbox = (req, o) => limiter.run(key, () => cri.runPodSandbox(req, o));
    limited.createContainer = (req, o) => limiter.run(key, () => cri.createContainer(req, o));
    limited.startContainer = (req, o) => limiter.run(key, () => cri.startContainer(req, o));
    return limited;
  };
}

/** Copies of the files the template mounts, for raw pod `name` (before its calls are timed). */
export function rawPodFiles(runId: string, name: string, template: ConfigTemplate): void {
  const dir = join(rawLogRoot(runId), name);
  mkdirSync(dir, { recursive: true });
  template.files.forEach((content, i) => {
    writeFileSync(join(dir, `mount-${i}`), content);
  });
}

/** The folder of the raw pods' logs of a run. */
export const rawLogRoot = (runId: string) => join(tmpdir(), `fleetlet-bench-${runId}`);

/** Stops and removes every sandbox labelled with this run's ID. */
export async function removeRawPods(cri: CriClient, runId: string): Promise<void> {
  const { items } = await cri.listPodSandbox({
    filter: { labelSelector: { [BENCH_LABEL]: runId } },
  });
  await Promise.all(
    items.map(async (sb) => {
      await cri.stopPodSandbox({ podSandboxId: sb.id }).catch(() => {});
      await cri.removePodSandbox({ podSandboxId: sb.id }).catch(() => {});
    }),
  );
}

/**
 * Where the agent's folders (root dir, pod logs) and the raw pods' files go: `ext4`, a fresh
 * 2 GiB ext4 with a journal on a loop device, like a device's /var/lib; or `tmp`, the system's
 * temp folder as it is. Sets TMPDIR for this process (TestAgent and rawLogRoot take their
 * folders from it), so call it before making them; returns the cleanup.
 *
 * Why: these test machines' root filesystem is an ext4 without a journal, where a new inode
 * skips every inode deleted in the last minutes, each skip a lookup in the inode table; after a
 * few rounds of creating and removing pods (the agent makes 7 inodes per pod) a new inode in
 * /tmp cost 0.4-0.6 ms of kernel CPU, against ~0.05 ms on a journaled ext4 (measured
 * 2026-12-01): several tens of ms of the agent's CPU per 30-pod burst that no device pays.
 */
export function scratchFilesystem(runId: string, kind: string): () => void {
  if (kind === "tmp") return () => {};
  if (kind !== "ext4") throw new Error(`unknown scratch filesystem ${JSON.stringify(kind)}`);
  const image = join("/var/tmp", `fleetlet-bench-${runId}.img`);
  const mount = join("/run", `fleetlet-bench-${runId}`);
  const run = (argv: string[]) => {
    const p = Bun.spawnSync(argv, { stdout: "pipe", stderr: "pipe" });
    if (p.exitCode !== 0) throw new Error(`${argv.join(" ")}: ${p.stderr.toString().trim()}`);
  };
  writeFileSync(image, "");
  run(["truncate", "-s", "2G", image]);
  run(["mkfs.ext4", "-q", "-F", image]);
  mkdirSync(mount, { recursive: true });
  run(["mount", "-o", "loop", image, mount]);
  process.env.TMPDIR = mount;
  return () => {
    Bun.spawnSync(["umount", mount]);
    rmSync(mount, { recursive: true, force: true });
    rmSync(image, { force: true });
  };
}

/**
 * Drops the kernel's clean page cache (needs root). A removed pod's memory cgroups stay alive
 * in the kernel ("dying") while page cache and other memory charged to them remain: a 30-pod
 * round left ~100-200 of them, and with hundreds the kernel's cgroup work got slower round after
 * round (containerd's CPU per round grew from ~430 to ~710 ms within one run). Dropping the
 * cache frees them, so that every round starts from the same state (measured: 262 memory
 * cgroups alive before, 29 after). The cost is that the next round reads its binaries from
 * disk again, on both sides alike.
 */
export function releaseDyingCgroups(): void {
  try {
    writeFileSync("/proc/sys/vm/drop_caches", "1");
  } catch {
    // not root, or not Linux: rounds then drift as described
  }
}

/**
 * Waits (at most `maxMs`) until containerd has used less than 5 % of a core for half a second:
 * the removal of the last round's pods goes on in containerd (snapshots, its database) after
 * the CRI calls that asked for it returned, and a round that starts meanwhile shares the CPU
 * with it. Returns whether it got quiet.
 */
export async function quietRuntime(containerdPid: number, maxMs = 15_000): Promise<boolean> {
  const deadline = performance.now() + maxMs;
  while (performance.now() < deadline) {
    const t0 = cpuTicks(containerdPid);
    await Bun.sleep(500);
    if ((cpuTicks(containerdPid) - t0) * 10 < 25) return true;
  }
  return false;
}

/** The q-quantile (0..1) of `values` by nearest rank. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] as number;
}

export const ms = (v: number) => `${v.toFixed(1)} ms`;

/** utime + stime of a process, in clock ticks (USER_HZ, 100 on Linux). */
export function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return Number(fields[11]) + Number(fields[12]);
}

/** The machine's CPU time from /proc/stat, in clock ticks summed over all CPUs. */
export interface MachineTicks {
  total: number;
  /** Time not idle (user, nice, system, irq, softirq, steal). */
  busy: number;
  /** Time the hypervisor gave to someone else. */
  steal: number;
}

export function machineTicks(): MachineTicks {
  const line = readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "";
  const [user, nice, system, idle, iowait, irq, softirq, steal] = line
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number) as number[];
  const busy = (user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0);
  const total = busy + (idle ?? 0) + (iowait ?? 0) + (steal ?? 0);
  return { total, busy: busy + (steal ?? 0), steal: steal ?? 0 };
}

/** "busy 93% (18.2 CPU-s), steal 2%" of the machine between two readings. */
export function machineShare(a: MachineTicks, b: MachineTicks): string {
  const total = Math.max(1, b.total - a.total);
  const pct = (x: number) => `${Math.round((100 * x) / total)}%`;
  const cpuSeconds = ((b.busy - a.busy) / 100).toFixed(1);
  return `machine busy ${pct(b.busy - a.busy)} (${cpuSeconds} CPU-s), steal ${pct(b.steal - a.steal)}`;
}

/** VmRSS of a process in MB. */
export function rssMB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN);
  return kb / 1024;
}

/** A metric's value from the agent's /metrics text. */
export function metricValue(text: string, name: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

/** The end of a bench that ran one agent: the agent killed, its pods removed (8 sandboxes at a
 * time), its folders gone, the CRI client closed; a failing step is reported and the rest
 * still run. */
export async function cleanupAgentBench(
  agent: { nodeName: string; stop(sig: "SIGKILL"): Promise<unknown>; cleanup(): Promise<void> },
  cri: CriClient,
): Promise<void> {
  await agent.stop("SIGKILL").catch(() => {});
  await removeNodePods(cri, agent.nodeName).catch((e) => console.error(`cleanup failed: ${e}`));
  await agent.cleanup().catch((e) => console.error(`cleanup of the agent failed: ${e}`));
  cri.close();
}

/** Stops and removes the sandboxes of a node's pods, `parallel` at a time. */
export async function removeNodePods(cri: CriClient, nodeName: string, parallel = 8) {
  const { items } = await cri.listPodSandbox({
    filter: { labelSelector: { "io.fleetlet.node": nodeName } },
  });
  for (let i = 0; i < items.length; i += parallel) {
    await Promise.all(
      items.slice(i, i + parallel).map(async (sb) => {
        await cri.stopPodSandbox({ podSandboxId: sb.id }).catch(() => {});
        await cri.removePodSandbox({ podSandboxId: sb.id }).catch(() => {});
      }),
    );
  }
}

/** The `--name value` options of a benchmark, over `defaults`: a number option must be a number
 * of at least 1. An unknown or bad option prints one line and exits with status 2. */
export function benchOptions<T extends Record<string, number | string>>(
  bench: string,
  defaults: T,
  /** Options whose number may be 0 (the others must be at least 1). */
  zeroAllowed: readonly string[] = [],
  argv = process.argv.slice(2),
): T {
  const fail = (why: string): never => {
    console.error(`${bench}: ${why}`);
    process.exit(2);
  };
  let values: Record<string, string | boolean | undefined> = {};
  try {
    const options = Object.fromEntries(Object.keys(defaults).map((k) => [k, { type: "string" }]));
    values = parseArgs({ args: argv, options: options as never, strict: true }).values;
  } catch (error) {
    fail((error as Error).message);
  }
  const out: Record<string, number | string> = { ...defaults };
  for (const [name, value] of Object.entries(values)) {
    if (typeof value !== "string") continue;
    if (typeof defaults[name] === "number") {
      const n = Number(value);
      const min = zeroAllowed.includes(name) ? 0 : 1;
      if (!(n >= min)) fail(`--${name} must be a number of at least ${min}`);
      out[name] = n;
    } else out[name] = value;
  }
  return out as T;
}
