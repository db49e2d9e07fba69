// The container manager: the kubelet's cgroup hierarchy, node allocatable, resource admission and
// the CPU manager, behind one interface the agent wires in.
//
//   <cgroupRoot>/kubepods                 node allocatable for pods; Guaranteed pods' cgroups
//   <cgroupRoot>/kubepods/burstable       shares = summed cpu requests of Burstable pods
//   <cgroupRoot>/kubepods/besteffort      minimum shares
//   .../pod<uid>                          one per pod, the sandbox's cgroup parent
//
// Invariants: a pod cgroup is removed only when the pod is neither active, possibly running nor
// known to the runtime; a QoS cgroup that vanished is created again on the next update.
import type { Container, Pod } from "../../api/types.ts";
import type { Logger } from "../../util/log.ts";
import { type AdmitFailure, checkResourceFit } from "./admission.ts";
import {
  type AllocatableInput,
  computeAllocatable,
  type NodeResources,
  podsCgroupLimits,
} from "./allocatable.ts";
import type { CgroupManager } from "./cgroup.ts";
import { milliCPUToShares } from "./convert.ts";
import type { CpuManager } from "./cpu-manager.ts";
import type { CpuReconciler } from "./cpu-reconcile.ts";
import {
  podCgroupName,
  podResourceConfig,
  qosCgroupName,
  qosResourceConfigs,
} from "./pod-resources.ts";

export interface ContainerManagerOptions {
  /** "<cgroupRoot>/kubepods" as a cgroupfs name, e.g. "/kubepods". */
  podsRoot: string;
  /** Pids limit of each pod cgroup; ≤ 0 for none. */
  podPidsLimit: number;
  allocatable: AllocatableInput;
}

export interface ContainerManagerDeps {
  /** undefined when pod cgroups are off (cgroupsPerQOS: false). */
  cgroups: CgroupManager | undefined;
  cpu: CpuManager;
  /** Moves running containers to the cpuset the CPU manager wants now; absent: none. */
  cpuReconciler?: CpuReconciler;
  logger: Logger;
  /** Releases what the cgroup driver holds (the systemd driver's connection). */
  close?: () => void;
}

export interface ContainerManager {
  capacity(): NodeResources;
  allocatable(): NodeResources;
  /** Creates the pods' root and QoS cgroups (idempotent); throws naming the cgroup. */
  start(): Promise<void>;
  /** The pod's cgroup to give the runtime as cgroup parent, in the driver's form
   * ("/kubepods/burstable/pod<uid>", or its slice path under systemd; "" when cgroups are off). */
  podCgroupParent(pod: Pod): string;
  /** Creates the pod's cgroup if it is missing (updating the QoS cgroups first). */
  ensurePodCgroup(pod: Pod): Promise<void>;
  /** Kills what is left in the pod's cgroup and removes it; a missing one is no error. */
  removePodCgroup(uid: string): Promise<void>;
  /** Resource and CPU admission of `pod` against the `active` pods (kubelet's reasons). */
  admit(pod: Pod, active: readonly Pod[]): AdmitFailure | undefined;
  /** The container's cpuset for CreateContainer ("" for the runtime's default). */
  cpusetFor(pod: Pod, c: Container): string;
  /**
   * Updates QoS cgroups, removes pod cgroups of gone pods, frees CPUs of gone pods and moves
   * running containers to their current cpuset.
   */
  housekeeping(active: readonly Pod[], keep: (uid: string) => boolean): Promise<void>;
  /** The pod cgroups that exist now: uid → cgroup name. */
  listPodCgroups(): Promise<Map<string, string>>;
  /** Releases what the cgroup driver holds; pods and cgroups stay. */
  close(): void;
}

export function createContainerManager(
  opts: ContainerManagerOptions,
  deps: ContainerManagerDeps,
): ContainerManager {
  return new ContainerManagerImpl(opts, deps);
}

/** The kubelet's containerManagerImpl, on cgroupfs. */
class ContainerManagerImpl implements ContainerManager {
  /** undefined when pod cgroups are off. */
  private readonly cgroups: CgroupManager | undefined;
  private readonly cpu: CpuManager;
  private readonly log: Logger;
  /** The pods' root cgroup name (kubepods). */
  private readonly root: string;
  private readonly burstable: string;
  private readonly besteffort: string;
  private readonly nodeAllocatable: NodeResources;
  /** The pods admitted (or given a cgroup) since the last housekeeping, by uid; the QoS cgroups'
   * shares are summed over them. */
  private readonly admitted = new Map<string, Pod>();

  constructor(
    private readonly opts: ContainerManagerOptions,
    private readonly deps: ContainerManagerDeps,
  ) {
    this.cgroups = deps.cgroups;
    this.cpu = deps.cpu;
    this.log = deps.logger;
    this.root = opts.podsRoot;
    this.burstable = qosCgroupName(this.root, "Burstable");
    this.besteffort = qosCgroupName(this.root, "BestEffort");
    this.nodeAllocatable = computeAllocatable(opts.allocatable);
  }

  capacity(): NodeResources {
    return { ...this.opts.allocatable.capacity };
  }

  allocatable(): NodeResources {
    return { ...this.nodeAllocatable };
  }

  async start(): Promise<void> {
    if (this.cgroups === undefined) return;
    const limits = podsCgroupLimits(this.opts.allocatable);
    await this.cgroups.create(this.root, {
      cpuShares: milliCPUToShares(limits.cpuMilli),
      memory: limits.memory,
      ...(limits.pids !== undefined && { pidsLimit: limits.pids }),
    });
    await this.updateQOS();
  }

  /** Bound: the runtime manager is given this method alone. */
  readonly podCgroupParent = (pod: Pod): string =>
    this.cgroups === undefined ? "" : this.cgroups.literalName(podCgroupName(this.root, pod));

  async ensurePodCgroup(pod: Pod): Promise<void> {
    if (this.cgroups === undefined) return;
    const name = podCgroupName(this.root, pod);
    if (await this.cgroups.exists(name)) return;
    this.admitted.set(pod.metadata.uid ?? "", pod);
    await this.updateQOS();
    await this.cgroups.create(
      name,
      podResourceConfig(pod, { podPidsLimit: this.opts.podPidsLimit }),
    );
  }

  async removePodCgroup(uid: string): Promise<void> {
    const name = (await this.listPodCgroups()).get(uid);
    if (name !== undefined) await this.destroy(name);
  }

  admit(pod: Pod, active: readonly Pod[]): AdmitFailure | undefined {
    const failure = checkResourceFit(pod, active, this.nodeAllocatable);
    if (failure !== undefined) return failure;
    const before = this.cpu.state();
    const cpuError = this.cpu.admit(pod);
    if (cpuError !== undefined) {
      return {
        reason: "UnexpectedAdmissionError",
        message: `Allocate failed due to ${cpuError}, which is unexpected`,
      };
    }
    this.admitted.set(pod.metadata.uid ?? "", pod);
    // The shared pool shrank: containers running on it must leave the new exclusive CPUs.
    if (this.cpu.state() !== before)
      void this.deps.cpuReconciler?.reconcile([...this.admitted.values()]);
    return undefined;
  }

  /** Bound: the runtime manager is given this method alone. */
  readonly cpusetFor = (pod: Pod, c: Container): string => this.cpu.cpusetFor(pod, c);

  async housekeeping(active: readonly Pod[], keep: (uid: string) => boolean): Promise<void> {
    const { admitted, log } = this;
    admitted.clear();
    for (const pod of active) admitted.set(pod.metadata.uid ?? "", pod);
    this.cpu.removeStale((uid) => admitted.has(uid) || keep(uid));
    await this.deps.cpuReconciler?.reconcile(active);
    if (this.cgroups === undefined) return;
    await this.updateQOS();
    for (const [uid, name] of await this.listPodCgroups()) {
      if (admitted.has(uid) || keep(uid)) continue;
      log.info("removing the cgroup of a pod that is gone", { uid, cgroup: name });
      await this.destroy(name).catch((error) =>
        log.warn("could not remove a pod cgroup", { uid, cgroup: name, error }),
      );
    }
  }

  async listPodCgroups(): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    if (this.cgroups === undefined) return out;
    for (const parent of [this.root, this.burstable, this.besteffort]) {
      for (const child of await this.cgroups.children(parent)) {
        if (child.startsWith("pod")) out.set(child.slice(3), `${parent}/${child}`);
      }
    }
    return out;
  }

  /** Writes the QoS cgroups' shares for the admitted pods, creating a cgroup that vanished. */
  private async updateQOS(): Promise<void> {
    const cgroups = this.cgroups;
    if (cgroups === undefined) return;
    const configs = qosResourceConfigs([...this.admitted.values()]);
    for (const [name, config] of [
      [this.burstable, configs.burstable],
      [this.besteffort, configs.besteffort],
    ] as const) {
      try {
        await cgroups.update(name, config);
      } catch {
        await cgroups.create(name, config);
      }
    }
  }

  close(): void {
    this.deps.close?.();
  }

  private async destroy(name: string): Promise<void> {
    if (this.cgroups === undefined) return;
    await this.cgroups.kill(name);
    await this.cgroups.destroy(name);
  }
}
