// Keeps running containers on the cpuset the CPU manager wants for them now. A container created
// before a Guaranteed pod took exclusive CPUs still has the wider shared pool of that time; the
// reconciler narrows it with CRI UpdateContainerResources (linux.cpusetCpus only, so the other
// resources stay as they are). A plan is pure: desired cpuset per running container against the
// cpuset last written to it; the executor writes them and remembers what it wrote.
//
// Invariants: only running containers of active pods are updated; a failed update is not
// remembered, so it is tried again on the next pass; container IDs gone from the runtime are
// forgotten.
import type { Container, Pod } from "../../api/types.ts";
import type { Logger } from "../../util/log.ts";

/** A pod as the runtime lists it: its uid and its containers with their state. */
export interface RuntimePodContainers {
  uid: string;
  containers: readonly { id: string; name: string; state: string }[];
}

export interface CpusetUpdate {
  containerId: string;
  podUid: string;
  containerName: string;
  cpuset: string;
}

/**
 * The updates that put every running container of the `active` pods on its desired cpuset.
 * `desired` returns "" when the runtime decides (no update); containers whose last written
 * cpuset equals the desired one are left alone.
 */
export function planCpusetUpdates(
  active: readonly Pod[],
  running: readonly RuntimePodContainers[],
  desired: (pod: Pod, c: Container) => string,
  lastApplied: ReadonlyMap<string, string>,
): CpusetUpdate[] {
  const pods = new Map(active.map((p) => [p.metadata.uid ?? "", p]));
  const updates: CpusetUpdate[] = [];
  for (const rp of running) {
    const pod = pods.get(rp.uid);
    if (pod === undefined) continue;
    for (const rc of rp.containers) {
      if (rc.state !== "running") continue;
      const spec =
        pod.spec.containers.find((c) => c.name === rc.name) ??
        pod.spec.initContainers?.find((c) => c.name === rc.name);
      if (spec === undefined) continue;
      const cpuset = desired(pod, spec);
      if (cpuset === "" || lastApplied.get(rc.id) === cpuset) continue;
      updates.push({ containerId: rc.id, podUid: rp.uid, containerName: rc.name, cpuset });
    }
  }
  return updates;
}

export interface CpuReconcilerDeps {
  /** The runtime's pods (a listing may be a moment old). */
  runningPods(): Promise<readonly RuntimePodContainers[]>;
  /** Writes the container's cpuset (CRI UpdateContainerResources). */
  updateCpuset(containerId: string, cpuset: string): Promise<void>;
  /** The cpuset the CPU manager wants for the container ("" for the runtime's default). */
  desired(pod: Pod, c: Container): string;
  logger: Logger;
}

export interface CpuReconciler {
  /** One pass: plans against the runtime's listing and applies; never throws. */
  reconcile(active: readonly Pod[]): Promise<CpusetUpdate[]>;
  /** The cpuset last written per container ID. */
  lastApplied(): ReadonlyMap<string, string>;
}

export function createCpuReconciler(deps: CpuReconcilerDeps): CpuReconciler {
  const applied = new Map<string, string>();
  const log = deps.logger;

  async function pass(active: readonly Pod[]): Promise<CpusetUpdate[]> {
    let running: readonly RuntimePodContainers[];
    try {
      running = await deps.runningPods();
    } catch (error) {
      log.warn("could not list the runtime's pods to reconcile cpusets", { error });
      return [];
    }
    const present = new Set(running.flatMap((p) => p.containers.map((c) => c.id)));
    for (const id of [...applied.keys()]) if (!present.has(id)) applied.delete(id);
    const done: CpusetUpdate[] = [];
    for (const u of planCpusetUpdates(active, running, deps.desired, applied)) {
      try {
        await deps.updateCpuset(u.containerId, u.cpuset);
        applied.set(u.containerId, u.cpuset);
        done.push(u);
        log.info("updated a container's cpuset", { ...u });
      } catch (error) {
        log.warn("could not update a container's cpuset", { ...u, error });
      }
    }
    return done;
  }

  // Passes never overlap: a pass asked for while one runs starts after it.
  let tail: Promise<unknown> = Promise.resolve();
  return {
    lastApplied: () => applied,
    reconcile(active) {
      const next = tail.then(() => pass(active));
      tail = next.catch(() => {});
      return next;
    },
  };
}
