// Builds the container manager from the agent config and the machine: cgroup layout from
// /proc/self/mountinfo, capacity from the CPUs, memory and the root dir's file system, the CPU
// topology from sysfs. Every failure names what was read and the config field involved.
import { existsSync } from "node:fs";
import { readFile, statfs } from "node:fs/promises";
import { totalmem } from "node:os";
import { dirname } from "node:path";
import { realClock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import type { AgentConfig } from "../config/index.ts";
import type { StateWrites } from "../events/state-writes.ts";
import { type NodeResources, parseReservation, type Reservation } from "./allocatable.ts";
import type { CgroupManager } from "./cgroup.ts";
import { createCgroupSystemd, type SystemdUnits } from "./cgroup-systemd.ts";
import { createCgroupV1 } from "./cgroup-v1.ts";
import { createCgroupV2 } from "./cgroup-v2.ts";
import { type ContainerManager, createContainerManager } from "./container-manager.ts";
import { createCpuManager } from "./cpu-manager.ts";
import { type CpuReconcilerDeps, createCpuReconciler } from "./cpu-reconcile.ts";
import { reservedCpus } from "./cpu-static.ts";
import { type CpuTopology, readCpuTopology } from "./cpu-topology.ts";
import { type CpuSet, formatCpuSet, isSubset, parseCpuSet } from "./cpuset.ts";
import { detectCgroupLayout } from "./mountinfo.ts";
import { connectSystemd } from "./systemd-connect.ts";
import { systemdCgroupPath } from "./systemd-names.ts";

export type ResourceSettings = Pick<
  AgentConfig,
  | "rootDir"
  | "maxPods"
  | "cgroupRoot"
  | "cgroupsPerQOS"
  | "cgroupDriver"
  | "systemReserved"
  | "kubeReserved"
  | "evictionHard"
  | "podPidsLimit"
  | "cpuManagerPolicy"
  | "reservedSystemCPUs"
  | "cpuManagerStateFile"
>;

export interface SetupDeps {
  logger: Logger;
  mountinfo?: () => Promise<string>;
  topology?: () => Promise<CpuTopology>;
  memoryBytes?: () => number;
  storageBytes?: (path: string) => Promise<number>;
  /** How many processes the node can hold; undefined when unknown (no pids limit on kubepods). */
  maxPid?: () => Promise<number | undefined>;
  /** Replaces the cgroup driver detected from the mounts (tests, benchmarks). */
  cgroups?: CgroupManager;
  /** The link to systemd for cgroupDriver "systemd" (default: systemd's private socket, then the
   * system bus). */
  systemd?: () => Promise<SystemdUnits>;
  /** Whether the machine booted with systemd as init (default: /run/systemd/system exists). */
  systemdBooted?: () => boolean;
  /** The runtime's pods and the CRI cpuset update, to move running containers (static policy). */
  cpusets?: Pick<CpuReconcilerDeps, "runningPods" | "updateCpuset">;
  /** Where a failed write of the CPU manager's checkpoint is said. */
  stateWrites?: StateWrites;
}

/** "/" + "kubepods" → "/kubepods"; "/fleetlet-x" → "/fleetlet-x/kubepods". */
export function podsRootName(cgroupRoot: string): string {
  return `${cgroupRoot.replace(/\/+$/, "")}/kubepods`;
}

/** The node's PID count as the kubelet reads it: the smaller of kernel.pid_max and
 * kernel.threads-max; undefined (and logged) when neither can be read. */
async function readMaxPid(log: Logger): Promise<number | undefined> {
  const values: number[] = [];
  for (const file of ["/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max"]) {
    try {
      const n = Number((await readFile(file, "utf8")).trim());
      if (Number.isInteger(n) && n > 0) values.push(n);
    } catch (err) {
      log.warn("cannot read the node's process limit", { file, error: String(err) });
    }
  }
  return values.length === 0 ? undefined : Math.min(...values);
}

/** The size of the file system holding `path` (its nearest existing ancestor); 0 if unknown. */
async function rootFsBytes(path: string): Promise<number> {
  for (let p = path; ; p = dirname(p)) {
    try {
      const s = await statfs(p);
      return s.blocks * s.bsize;
    } catch {
      if (p === dirname(p)) return 0;
    }
  }
}

/** The cgroupfs driver of the mounted cgroup version; `literalName` maps a cgroup's name to its
 * path (the systemd driver's slice paths). */
export async function detectCgroups(
  mountinfo: () => Promise<string>,
  literalName?: (name: string) => string,
): Promise<CgroupManager> {
  const layout = detectCgroupLayout(await mountinfo());
  const named = literalName === undefined ? {} : { literalName };
  if (layout.version === 2) return createCgroupV2({ mountPoint: layout.mountPoint, ...named });
  return createCgroupV1({
    controllers: layout.controllers,
    ...(layout.unified !== undefined && { unified: layout.unified }),
    ...named,
  });
}

/** The cgroup driver `config.cgroupDriver` names, with what closes it (the systemd link). */
async function cgroupDriver(
  config: ResourceSettings,
  deps: SetupDeps,
  log: Logger,
): Promise<{ cgroups: CgroupManager; close?: () => void }> {
  if (deps.cgroups !== undefined) return { cgroups: deps.cgroups };
  const mountinfo = deps.mountinfo ?? (() => readFile("/proc/self/mountinfo", "utf8"));
  if (config.cgroupDriver === "cgroupfs") return { cgroups: await detectCgroups(mountinfo) };
  if (!(deps.systemdBooted ?? (() => existsSync("/run/systemd/system")))()) {
    throw new Error(
      'cgroupDriver: "systemd" needs systemd as init, and this machine did not boot with it (no /run/systemd/system): set cgroupDriver: "cgroupfs"',
    );
  }
  let systemd: SystemdUnits;
  try {
    systemd = await (deps.systemd ?? (() => connectSystemd({ clock: realClock, logger: log })))();
  } catch (err) {
    throw new Error(`cgroupDriver: "systemd": ${(err as Error).message}`);
  }
  const files = await detectCgroups(mountinfo, systemdCgroupPath);
  const cgroups = createCgroupSystemd({ files, systemd });
  return { cgroups, close: () => cgroups.close() };
}

/** The reservations and the reserved CPUs, as the kubelet reads them: explicit reserved CPUs
 * (reservedSystemCPUs) replace the cpu of systemReserved and kubeReserved. */
function reservations(
  config: ResourceSettings,
  topology: CpuTopology,
): { sys: Reservation; kube: Reservation; reserved: CpuSet } {
  const sys = parseReservation(config.systemReserved, "systemReserved");
  const kube = parseReservation(config.kubeReserved, "kubeReserved");
  const explicit = config.reservedSystemCPUs ? parseCpuSet(config.reservedSystemCPUs) : undefined;
  const all = topology.cpus.map((c) => c.id);
  if (explicit && !isSubset(explicit, all)) {
    throw new Error(
      `reservedSystemCPUs: ${JSON.stringify(config.reservedSystemCPUs)} is not within the online CPUs ${formatCpuSet(all)}`,
    );
  }
  if (explicit && explicit.length > 0) {
    sys.cpu = explicit.length * 1000;
    kube.cpu = 0;
  }
  const reserved = reservedCpus(topology, explicit, sys.cpu + kube.cpu);
  return { sys, kube, reserved };
}

/** The node's capacity: CPUs, memory, the root dir's file system, pods and (if known) PIDs. */
async function nodeCapacity(
  config: ResourceSettings,
  deps: SetupDeps,
  topology: CpuTopology,
  log: Logger,
): Promise<NodeResources> {
  const capacity: NodeResources = {
    cpu: topology.cpus.length * 1000,
    memory: (deps.memoryBytes ?? totalmem)(),
    ephemeralStorage: await (deps.storageBytes ?? rootFsBytes)(config.rootDir),
    pods: config.maxPods,
  };
  const maxPid = await (deps.maxPid ?? (() => readMaxPid(log)))();
  if (maxPid !== undefined) capacity.pid = maxPid;
  return capacity;
}

/** Creates the container manager and its cgroup hierarchy; throws a clear error when it cannot. */
export async function setupContainerManager(
  config: ResourceSettings,
  deps: SetupDeps,
): Promise<ContainerManager> {
  const log = deps.logger.with({ component: "cm" });
  const topology = await (deps.topology ?? (() => readCpuTopology()))();
  const { sys, kube, reserved } = reservations(config, topology);
  const capacity = await nodeCapacity(config, deps, topology, log);
  const cpu = createCpuManager({
    policy: config.cpuManagerPolicy,
    topology,
    reserved,
    stateFile: config.cpuManagerStateFile,
    logger: log,
    ...(deps.stateWrites !== undefined && { stateWrites: deps.stateWrites }),
  });
  cpu.start();
  const driver = config.cgroupsPerQOS ? await cgroupDriver(config, deps, log) : undefined;
  const cgroups = driver?.cgroups;
  const podsRoot = podsRootName(config.cgroupRoot);
  const cm = createContainerManager(
    {
      podsRoot,
      podPidsLimit: config.podPidsLimit,
      allocatable: {
        capacity,
        systemReserved: sys,
        kubeReserved: kube,
        evictionHard: config.evictionHard,
      },
    },
    {
      cgroups,
      cpu,
      logger: log,
      ...(driver?.close !== undefined && { close: driver.close }),
      ...(deps.cpusets &&
        config.cpuManagerPolicy === "static" && {
          cpuReconciler: createCpuReconciler({
            ...deps.cpusets,
            desired: cpu.cpusetFor,
            logger: log,
          }),
        }),
    },
  );
  await startPodCgroups(cm, config, podsRoot);
  log.info("container manager started", {
    cgroups: cgroups === undefined ? "off" : `v${cgroups.version}`,
    cgroupDriver: config.cgroupDriver,
    root: podsRoot,
    allocatable: cm.allocatable(),
    cpuManagerPolicy: config.cpuManagerPolicy,
    reservedCPUs: formatCpuSet(reserved),
  });
  return cm;
}

async function startPodCgroups(
  cm: ContainerManager,
  config: ResourceSettings,
  podsRoot: string,
): Promise<void> {
  try {
    await cm.start();
  } catch (err) {
    throw new Error(
      `Cannot set up the pod cgroups under ${podsRoot} (cgroupRoot ${JSON.stringify(config.cgroupRoot)}): ${(err as Error).message}; set cgroupsPerQOS: false to run pods without them`,
    );
  }
}
