// The container GC (kubelet's containerGC): every period, lists the node's containers and
// sandboxes, plans with planContainerGC() and removes what the plan says, a container with its
// log files. deleteAllUnusedContainers() is the eviction manager's reclaim step: the same pass
// with no dead instance kept.
//
// Invariants:
// - run() never throws: a pass that cannot list the runtime is logged, reported as a
//   ContainerGCFailed node event and tried again next period; one failed removal does not stop
//   the others (a container's is logged and retried next pass; a sandbox's is reported once and
//   retried with a back-off, see sandbox-retry.ts).
// - A sandbox is removed only after every container the plan removed from it is gone.
// - Passes never overlap: a reclaim during a periodic pass waits for it.
import type { CriRuntime } from "../../cri/index.ts";
import { type Clock, sleepQuietly } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import {
  LABEL_CONTAINER_NAME,
  LABEL_POD_NAME,
  LABEL_POD_NAMESPACE,
  LABEL_POD_UID,
  nodeSelector,
  toContainerState,
} from "../kuberuntime/index.ts";
import {
  type ContainerGCAction,
  type ContainerGCPolicy,
  type GCContainer,
  type GCSandbox,
  type PodGCState,
  planContainerGC,
} from "./container-plan.ts";
import { SandboxRetries } from "./sandbox-retry.ts";

export interface ContainerGCDeps {
  cri: Pick<CriRuntime, "listContainers" | "listPodSandbox">;
  clock: Clock;
  logger: Logger;
  /** Only objects labelled for this node are looked at. */
  nodeName: string;
  policy: ContainerGCPolicy;
  /** Time between passes (kubelet: 1 min). */
  periodMs: number;
  /** A container in state "created" younger than this is being started, not dead (the agent's
   * StartContainer deadline). */
  createdGraceMs: number;
  /** Whether every pod source was seen once (PodConfig.seenAllSources). */
  sourcesReady(): boolean;
  podState(uid: string): PodGCState;
  /** Removes a dead container and its log files; resolves to the bytes of logs removed. */
  removeContainer(id: string): Promise<number>;
  /** Stops a container in unknown state (it could be running) before it is removed. */
  stopContainer(id: string, name: string): Promise<void>;
  /** Stops (idempotent) and removes a sandbox. */
  removeSandbox(id: string): Promise<void>;
  /** A Warning event about the node (reason ContainerGCFailed): a pass that failed, or a
   * sandbox that cannot be removed (once per sandbox). */
  nodeEvent(reason: string, message: string): void;
}

/** What a pass removed. */
export interface ContainersFreed {
  containers: number;
  sandboxes: number;
  /** Bytes of container log files removed with the containers. */
  logBytes: number;
}

export interface ContainerGC {
  /** One periodic pass with the configured policy. Throws when the runtime cannot be listed. */
  garbageCollect(): Promise<ContainersFreed>;
  /** Removes every dead container it may (no minimum age, no dead instance kept; the newest
   * instance of a finished pod's containers stays) and the sandboxes left empty. */
  deleteAllUnusedContainers(): Promise<ContainersFreed>;
  run(signal: AbortSignal): Promise<void>;
}

const nsToMs = (ns: number) => Math.floor(ns / 1e6);

interface Observed {
  containers: GCContainer[];
  sandboxes: GCSandbox[];
  /** "namespace/name" of each sandbox's pod, by sandbox ID. */
  podNames: Map<string, string>;
}

async function observe(deps: ContainerGCDeps): Promise<Observed> {
  const filter = { labelSelector: nodeSelector(deps.nodeName) };
  const [cs, sbs] = await Promise.all([
    deps.cri.listContainers({ filter }),
    deps.cri.listPodSandbox({ filter }),
  ]);
  const containers = cs.containers.map((c) => ({
    id: c.id,
    podUid: c.labels[LABEL_POD_UID] ?? "",
    name: c.labels[LABEL_CONTAINER_NAME] ?? c.metadata?.name ?? "",
    sandboxId: c.podSandboxId,
    state: toContainerState(c.state),
    createdAt: nsToMs(c.createdAt),
  }));
  const sandboxes = sbs.items.map((s) => ({
    id: s.id,
    podUid: s.labels[LABEL_POD_UID] ?? s.metadata?.uid ?? "",
    ready: s.state === "SANDBOX_READY",
    createdAt: nsToMs(s.createdAt),
  }));
  const podNames = new Map(
    sbs.items.map((s) => [
      s.id,
      `${s.labels[LABEL_POD_NAMESPACE] ?? s.metadata?.namespace ?? ""}/${s.labels[LABEL_POD_NAME] ?? s.metadata?.name ?? ""}`,
    ]),
  );
  return { containers, sandboxes, podNames };
}

/** What one pass carries from action to action. */
interface PassState {
  freed: ContainersFreed;
  /** Containers whose removal failed: their sandboxes stay. */
  failed: Set<string>;
  now: number;
  podNames: ReadonlyMap<string, string>;
}

type Executor = {
  [K in ContainerGCAction["kind"]]: (
    action: Extract<ContainerGCAction, { kind: K }>,
    pass: PassState,
  ) => Promise<void>;
};

function executor(deps: ContainerGCDeps, retries: SandboxRetries): Executor {
  const message = (err: unknown) => (err instanceof Error ? err.message : String(err));
  return {
    async removeContainer(a, { freed, failed }) {
      try {
        if (a.stopFirst) await deps.stopContainer(a.id, a.name);
        freed.logBytes += await deps.removeContainer(a.id);
        freed.containers++;
      } catch (err) {
        failed.add(a.id);
        deps.logger.warn("container GC: cannot remove container", {
          id: a.id,
          pod: a.podUid,
          error: message(err),
        });
      }
    },
    async removeSandbox(a, { freed, failed, now, podNames }) {
      if (a.after.some((id) => failed.has(id)) || retries.waiting(a.id, now)) return;
      const pod = podNames.get(a.id) ?? a.podUid;
      try {
        await deps.removeSandbox(a.id);
        freed.sandboxes++;
        retries.removed(a.id, pod);
      } catch (err) {
        retries.failed(a.id, pod, message(err), now);
      }
    },
  };
}

export function createContainerGC(deps: ContainerGCDeps): ContainerGC {
  return new ContainerGarbageCollector(deps);
}

/** The policy of a reclaim pass: nothing dead is kept for its age or as an instance. */
const RECLAIM_POLICY: ContainerGCPolicy = { minAgeMs: 0, maxPerPodContainer: 0, maxContainers: 0 };

class ContainerGarbageCollector implements ContainerGC {
  private readonly retries: SandboxRetries;
  private readonly table: Executor;
  /** Settles when the pass under way (if any) does; the next pass waits for it. */
  private running: Promise<unknown> = Promise.resolve();

  constructor(private readonly deps: ContainerGCDeps) {
    this.retries = new SandboxRetries(deps);
    this.table = executor(deps, this.retries);
  }

  garbageCollect(): Promise<ContainersFreed> {
    return this.serialized(this.deps.policy);
  }

  deleteAllUnusedContainers(): Promise<ContainersFreed> {
    return this.serialized(RECLAIM_POLICY);
  }

  async run(signal: AbortSignal): Promise<void> {
    const deps = this.deps;
    while (!signal.aborted) {
      await sleepQuietly(deps.clock, deps.periodMs, signal);
      if (signal.aborted) break;
      try {
        await this.garbageCollect();
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        deps.logger.error("container garbage collection failed", { error: message });
        deps.nodeEvent("ContainerGCFailed", message);
      }
    }
  }

  /** Runs passes one at a time. */
  private serialized(policy: ContainerGCPolicy): Promise<ContainersFreed> {
    const next = this.running.then(
      () => this.pass(policy),
      () => this.pass(policy),
    );
    this.running = next.catch(() => undefined);
    return next;
  }

  /** Observes the runtime, plans, and carries the plan out. */
  private async pass(policy: ContainerGCPolicy): Promise<ContainersFreed> {
    const deps = this.deps;
    const { containers, sandboxes, podNames } = await observe(deps);
    this.retries.keepOnly(new Set(podNames.keys()));
    const now = deps.clock.now();
    const actions = planContainerGC({
      containers,
      sandboxes,
      now,
      policy,
      sourcesReady: deps.sourcesReady(),
      createdGraceMs: deps.createdGraceMs,
      podState: deps.podState,
    });
    const state: PassState = {
      freed: { containers: 0, sandboxes: 0, logBytes: 0 },
      failed: new Set(),
      now,
      podNames,
    };
    for (const a of actions) {
      await (this.table[a.kind] as Executor[ContainerGCAction["kind"]])(a as never, state);
    }
    const { freed } = state;
    if (freed.containers + freed.sandboxes > 0) {
      deps.logger.info("container GC", { ...freed });
    }
    return freed;
  }
}
