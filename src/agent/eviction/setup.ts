// The agent's eviction manager: its thresholds from the agent config, its signals read from this
// host (the cgroup layout of /proc/self/mountinfo, statfs of the root dir and of the runtime's
// image filesystem, /proc), and pod figures from the pod cgroups and the runtime.
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Pod } from "../../api/types.ts";
import type { CriRuntime } from "../../cri/index.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import {
  type CgroupLayout,
  detectCgroupLayout,
  literalCgroupName,
  podsRootName,
} from "../cm/index.ts";
import type { AgentConfig } from "../config/index.ts";
import { type EventRecorder, podRef } from "../events/index.ts";
import type { Observation, Signal } from "../evictionapi/signals.ts";
import { buildThresholds } from "../evictionapi/thresholds.ts";
import { imageFsMountpoint } from "../images/index.ts";
import { LABEL_POD_UID, nodeSelector } from "../kuberuntime/index.ts";
import type { PodWorkers } from "../podworkers/index.ts";
import { createPodEvictor } from "./evict-pod.ts";
import {
  createEvictionManager,
  type EvictionManager,
  type EvictionManagerDeps,
} from "./manager.ts";
import {
  deviceOf,
  type FsObservation,
  filesystem,
  type MemoryCgroup,
  memoryStall,
  nodeMemory,
  pids,
  podsMemory,
  readText,
} from "./observe.ts";
import { collectPodUsage } from "./pod-stats.ts";
import { createPsiReader, formatPsi, type NodePsi } from "./psi.ts";

type EvictionSettings = Pick<
  AgentConfig,
  | "rootDir"
  | "podLogsDir"
  | "nodeName"
  | "cgroupRoot"
  | "cgroupsPerQOS"
  | "cgroupDriver"
  | "evictionHard"
  | "evictionSoft"
  | "evictionSoftGracePeriod"
  | "evictionMinimumReclaim"
  | "evictionMaxPodGracePeriod"
  | "evictionPressureTransitionPeriod"
  | "evictionMonitoringPeriod"
  | "evictionMemoryStall"
>;

export interface AgentEvictionInput
  extends Pick<
    EvictionManagerDeps,
    | "activePods"
    | "evictPod"
    | "podCleanedUp"
    | "nodeEvent"
    | "reclaim"
    | "onConditions"
    | "emptyDirLimits"
  > {
  config: EvictionSettings;
  cri: Pick<CriRuntime, "imageFsInfo" | "listContainerStats">;
  clock: Clock;
  logger: Logger;
  /** The pod's cgroup name ("/kubepods/burstable/pod<uid>"), "" without pod cgroups. */
  podCgroupName(pod: Pod): string;
  /** /proc/self/mountinfo (tests replace it). */
  mountinfo?: () => string;
}

/** The nearest existing folder of `path` (the root dir may not exist yet). */
function existing(path: string): string {
  let p = path;
  while (!existsSync(p) && dirname(p) !== p) p = dirname(p);
  return p;
}

/** Memory and pids controller folders of a cgroup name, per the layout. */
function cgroupDirs(layout: CgroupLayout, name: string): { memory?: MemoryCgroup; pids?: string } {
  if (layout.version === 2) {
    const dir = join(layout.mountPoint, name);
    return { memory: { version: 2, dir }, pids: dir };
  }
  const memory = layout.controllers.get("memory");
  const pidsMount = layout.controllers.get("pids");
  return {
    ...(memory && { memory: { version: 1 as const, dir: join(memory, name) } }),
    ...(pidsMount && { pids: join(pidsMount, name) }),
  };
}

/** The memory limit of a cgroup, undefined when unlimited. */
function memoryLimit(cg: MemoryCgroup): number | undefined {
  const file = join(cg.dir, cg.version === 1 ? "memory.limit_in_bytes" : "memory.max");
  const text = readText(file).trim();
  const n = Number(text);
  return text === "max" || !Number.isFinite(n) || n >= 2 ** 62 ? undefined : n;
}

/** Reads the runtime's image filesystem mountpoint, at most once a minute. */
function imageFsLocator(input: AgentEvictionInput): () => Promise<string> {
  let cached: { path: string; at: number } | undefined;
  return async () => {
    const now = input.clock.monotonic();
    if (cached !== undefined && now - cached.at < 60_000) return cached.path;
    const path = await imageFsMountpoint(input.cri);
    cached = { path, at: now };
    return path;
  };
}

/** Where this host's node-level signals are read. */
interface HostSignals {
  rootDir: string;
  /** The root memory cgroup (memory.available). */
  rootMemory: MemoryCgroup | undefined;
  /** The pods' memory cgroup (allocatableMemory.available). */
  podsCgroup: MemoryCgroup | undefined;
  imageFs: () => Promise<string>;
}

/** Reads the `signals` from this host; the signals of a read that fails get its error. */
async function observeHost(
  host: HostSignals,
  signals: ReadonlySet<Signal>,
): Promise<{ observations: Map<Signal, Observation>; errors: Map<Signal, string> }> {
  const observations = new Map<Signal, Observation>();
  const errors = new Map<Signal, string>();
  const read = (names: Signal[], fn: () => Observation[] | Promise<Observation[]>) =>
    Promise.resolve()
      .then(fn)
      .then(
        (values) => {
          for (const [i, n] of names.entries()) {
            const v = values[i];
            if (v !== undefined) observations.set(n, v);
          }
        },
        (err: Error) => {
          for (const n of names) errors.set(n, err.message);
        },
      );
  const fsPair = (fs: FsObservation) => [fs.bytes, fs.inodes];
  const wants = (...names: Signal[]) => names.some((n) => signals.has(n));
  const { podsCgroup } = host;
  if (wants("memory.available")) {
    await read(["memory.available"], () => [nodeMemory(host.rootMemory)]);
  }
  if (wants("allocatableMemory.available"))
    await read(["allocatableMemory.available"], () => {
      if (podsCgroup === undefined) throw new Error("no memory cgroup controller");
      const limit = memoryLimit(podsCgroup);
      if (limit === undefined) throw new Error(`${podsCgroup.dir} has no memory limit`);
      return [podsMemory(podsCgroup, limit)];
    });
  if (wants("nodefs.available", "nodefs.inodesFree"))
    await read(["nodefs.available", "nodefs.inodesFree"], () =>
      fsPair(filesystem(existing(host.rootDir))),
    );
  if (wants("imagefs.available", "imagefs.inodesFree"))
    await read(["imagefs.available", "imagefs.inodesFree"], async () =>
      fsPair(filesystem(await host.imageFs())),
    );
  if (wants("pid.available")) await read(["pid.available"], () => [pids()]);
  if (wants("memory.stall")) await read(["memory.stall"], () => [memoryStall()]);
  return { observations, errors };
}

/** The pods' figures: from their cgroups (per the layout), their folders and the runtime. */
function podUsageReader(
  input: AgentEvictionInput,
  layout: CgroupLayout,
): EvictionManagerDeps["podUsage"] {
  const { config } = input;
  return (pods, wanted) =>
    collectPodUsage(
      pods,
      {
        rootDir: config.rootDir,
        podLogsDir: config.podLogsDir,
        podCgroup: (pod) => {
          const name = input.podCgroupName(pod);
          return name === "" ? undefined : cgroupDirs(layout, name);
        },
        listContainerStats: async (podUid) => {
          const labelSelector = {
            ...nodeSelector(config.nodeName),
            ...(podUid !== undefined && { [LABEL_POD_UID]: podUid }),
          };
          const req = { filter: { labelSelector } };
          return (await input.cri.listContainerStats(req, { timeoutMs: 10_000 })).stats;
        },
      },
      wanted,
    );
}

export function createAgentEviction(input: AgentEvictionInput): EvictionManager {
  const { config } = input;
  const layout = detectCgroupLayout(
    (input.mountinfo ?? (() => readFileSync("/proc/self/mountinfo", "utf8")))(),
  );
  const host: HostSignals = {
    rootDir: config.rootDir,
    rootMemory: cgroupDirs(layout, "/").memory,
    podsCgroup: cgroupDirs(
      layout,
      literalCgroupName(config.cgroupDriver, podsRootName(config.cgroupRoot)),
    ).memory,
    imageFs: imageFsLocator(input),
  };
  return createEvictionManager({
    ...input,
    thresholds: buildThresholds(config, { podCgroups: config.cgroupsPerQOS }),
    pressureTransitionMs: config.evictionPressureTransitionPeriod,
    monitoringPeriodMs: config.evictionMonitoringPeriod,
    maxPodGracePeriodSeconds: config.evictionMaxPodGracePeriod,
    observe: (signals) => observeHost(host, signals),
    dedicatedImageFs: async () =>
      deviceOf(existing(config.rootDir)) !== deviceOf(await host.imageFs()),
    podUsage: podUsageReader(input, layout),
  });
}

/** The node's PSI reader, logging once each way when it stops or starts being readable. */
export function createLoggedPsiReader(logger: Logger): () => NodePsi {
  const psiLog = logger.with({ component: "psi" });
  return createPsiReader((resource, error) =>
    error === undefined
      ? psiLog.info("node pressure stall information readable again", { resource })
      : psiLog.warn("cannot read the node's pressure stall information", { resource, error }),
  );
}

export interface EvictionWiring {
  config: EvictionSettings;
  cri: AgentEvictionInput["cri"];
  clock: Clock;
  logger: Logger;
  cm: { podCgroupParent(pod: Pod): string };
  workers: Pick<PodWorkers, "activePods" | "updatePod" | "couldHaveRunningContainers">;
  recorder: Pick<EventRecorder, "event">;
  volumes: { diskEmptyDirLimits: NonNullable<AgentEvictionInput["emptyDirLimits"]> };
  /** Disk reclaim before evicting (the garbage collectors' DiskReclaim). */
  reclaim: {
    deleteAllUnusedContainers(): Promise<unknown>;
    deleteUnusedImages(): Promise<unknown>;
  };
  /** Told when the pressure conditions changed (the node status manager). */
  onConditions(): void;
}

/** The eviction manager as the agent wires it: pods from the workers, events to the recorder. */
export function setupEviction(w: EvictionWiring): EvictionManager {
  const { config, workers, recorder } = w;
  return createAgentEviction({
    config,
    cri: w.cri,
    clock: w.clock,
    logger: w.logger.with({ component: "eviction" }),
    podCgroupName: (pod) => w.cm.podCgroupParent(pod),
    activePods: () => workers.activePods(),
    evictPod: createPodEvictor({
      warn: (pod, reason, message) => recorder.event(podRef(pod), "Warning", reason, message),
      updatePod: (update) => workers.updatePod(update),
    }),
    podCleanedUp: (uid) => !workers.couldHaveRunningContainers(uid),
    emptyDirLimits: (pod) => w.volumes.diskEmptyDirLimits(pod),
    nodeEvent: (type, reason, message) =>
      recorder.event({ kind: "Node", namespace: "", name: config.nodeName }, type, reason, message),
    onConditions: () => w.onConditions(),
    // Disk pressure first frees what the node can (the kubelet's node-level reclaim).
    reclaim: {
      containers: () => w.reclaim.deleteAllUnusedContainers(),
      images: () => w.reclaim.deleteUnusedImages(),
    },
  });
}

/** The node's PSI lines as the node's annotations show them. */
export function formatNodePsi(psi: NodePsi): Record<string, string> {
  return Object.fromEntries(Object.entries(psi).map(([r, line]) => [r, formatPsi(line)]));
}
