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
}

export interface ContainerManager {
  capacity(): NodeResources;
  allocatable(): NodeResources;
  /** Creates the pods' root and QoS cgroups (idempotent); throws naming the cgroup. */
  start(): Promise<void>;
  /** The pod's cgroup name to give the runtime as cgroup parent ("" when cgroups are off). */
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
}

export function createContainerManager(
  opts: ContainerManagerOptions,
  deps: ContainerManagerDeps,
): ContainerManager {
  const { cgroups, cpu, cpuReconciler, logger: log } = deps;
  const root = opts.podsRoot;
  const allocatable = computeAllocatable(opts.allocatable);
  const admitted = new Map<string, Pod>();
  const burstable = qosCgroupName(root, "Burstable");
  const besteffort = qosCgroupName(root, "BestEffort");

  async function updateQOS(): Promise<void> {
    if (cgroups === undefined) return;
    const configs = qosResourceConfigs([...admitted.values()]);
    for (const [name, config] of [
      [burstable, configs.burstable],
      [besteffort, configs.besteffort],
    ] as const) {
      try {
        await cgroups.update(name, config);
      } catch {
        await cgroups.create(name, config);
      }
    }
  }

  async function listPodCgroups(): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    if (cgroups === undefined) return out;
    for (const parent of [root, burstable, besteffort]) {
      for (const child of await cgroups.children(parent)) {
        if (child.startsWith("pod")) out.set(child.slice(3), `${parent}/${child}`);
      }
    }
    return out;
  }

  async function destroy(name: string): Promise<void> {
    if (cgroups === undefined) return;
    await cgroups.kill(name);
    await cgroups.destroy(name);
  }

  return {
    capacity: () => ({ ...opts.allocatable.capacity }),
    allocatable: () => ({ ...allocatable }),
    listPodCgroups,

    async start() {
      if (cgroups === undefined) return;
      const limits = podsCgroupLimits(opts.allocatable);
      await cgroups.create(root, {
        cpuShares: milliCPUToShares(limits.cpuMilli),
        memory: limits.memory,
        ...(limits.pids !== undefined && { pidsLimit: limits.pids }),
      });
      await updateQOS();
    },

    podCgroupParent: (pod) => (cgroups === undefined ? "" : podCgroupName(root, pod)),

    async ensurePodCgroup(pod) {
      if (cgroups === undefined) return;
      const name = podCgroupName(root, pod);
      if (await cgroups.exists(name)) return;
      admitted.set(pod.metadata.uid ?? "", pod);
      await updateQOS();
      await cgroups.create(name, podResourceConfig(pod, { podPidsLimit: opts.podPidsLimit }));
    },

    async removePodCgroup(uid) {
      const name = (await listPodCgroups()).get(uid);
      if (name !== undefined) await destroy(name);
    },

    admit(pod, active) {
      const failure = checkResourceFit(pod, active, allocatable);
      if (failure !== undefined) return failure;
      const before = cpu.state();
      const cpuError = cpu.admit(pod);
      if (cpuError !== undefined) {
        return {
          reason: "UnexpectedAdmissionError",
          message: `Allocate failed due to ${cpuError}, which is unexpected`,
        };
      }
      admitted.set(pod.metadata.uid ?? "", pod);
      // The shared pool shrank: containers running on it must leave the new exclusive CPUs.
      if (cpu.state() !== before) void cpuReconciler?.reconcile([...admitted.values()]);
      return undefined;
    },

    cpusetFor: (pod, c) => cpu.cpusetFor(pod, c),

    async housekeeping(active, keep) {
      admitted.clear();
      for (const pod of active) admitted.set(pod.metadata.uid ?? "", pod);
      cpu.removeStale((uid) => admitted.has(uid) || keep(uid));
      await cpuReconciler?.reconcile(active);
      if (cgroups === undefined) return;
      await updateQOS();
      for (const [uid, name] of await listPodCgroups()) {
        if (admitted.has(uid) || keep(uid)) continue;
        log.info("removing the cgroup of a pod that is gone", { uid, cgroup: name });
        await destroy(name).catch((error) =>
          log.warn("could not remove a pod cgroup", { uid, cgroup: name, error }),
        );
      }
    },
  };
}
