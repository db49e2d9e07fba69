// The node status manager: rebuilds the Node every `updateFrequencyMs` (kubelet's
// nodeStatusUpdateFrequency, 10 s) and as soon as the runtime's health changes, and tells
// subscribers when it changed in more than heartbeat times, or when `reportFrequencyMs` passed
// since the last report (kubelet's nodeStatusReportFrequency). Invariant: node() always returns
// the last built Node; update() never throws.
import type { Node } from "../../api/node.ts";
import type { ResourceList } from "../../api/types.ts";
import { type Clock, sleepQuietly } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import { buildNode, type NodeState, nodeChanged } from "./build.ts";
import type { NodeFacts } from "./facts.ts";

export interface NodeStatusDeps {
  clock: Clock;
  logger: Logger;
  facts: NodeFacts;
  /** The runtime's health (the agent's RuntimeHealth). */
  health: { healthy(): boolean; reasons(): string[] };
  /** "containerd://1.6.20" from CRI Version; rejects when the runtime does not answer. */
  runtimeVersion: () => Promise<string>;
  /** Bytes of the root dir's filesystem. */
  ephemeralStorage: () => Promise<number | undefined>;
  /** Allocatable from the container manager; capacity when absent. */
  allocatable?: () => ResourceList;
  /** Memory/disk/PID pressure from the eviction manager; none when absent. */
  pressure?: () => NodeState["pressure"];
  /** The images on the node (the image GC's list); none reported when absent. */
  images?: () => NodeState["images"];
  /** The node's PSI as annotation texts; none when absent. */
  psi?: () => NodeState["psi"];
  updateFrequencyMs?: number;
  reportFrequencyMs?: number;
  /** How often runtime health is looked at between updates (no I/O); 500 ms by default. */
  healthPollMs?: number;
}

export interface NodeStatusManager {
  /** The last built Node (a copy). */
  node(): Node;
  /** Rebuilds the Node now; notifies subscribers when it is worth reporting. */
  update(): Promise<Node>;
  /** Calls `fn` with each Node worth reporting; returns an unsubscribe function. */
  subscribe(fn: (node: Node) => void): () => void;
  run(signal: AbortSignal): Promise<void>;
}

export function createNodeStatusManager(deps: NodeStatusDeps): NodeStatusManager {
  const updateMs = deps.updateFrequencyMs ?? 10_000;
  const reportMs = deps.reportFrequencyMs ?? 5 * 60_000;
  const subscribers = new Set<(node: Node) => void>();
  let runtimeVersion = "";
  /** The last error reading the root dir's filesystem, logged once until a read succeeds. */
  let storageError: string | undefined;
  let current: Node | undefined;
  current = build();
  let lastReport = Number.NEGATIVE_INFINITY;
  const last = (): Node => current ?? build();

  function state(): NodeState {
    return {
      runtimeHealthy: deps.health.healthy(),
      runtimeReasons: deps.health.reasons(),
      runtimeVersion,
      ephemeralStorageBytes: undefined,
      ...(deps.allocatable && { allocatable: deps.allocatable() }),
      ...(deps.pressure && { pressure: deps.pressure() }),
      ...(deps.images && { images: deps.images() }),
      ...(deps.psi && { psi: deps.psi() }),
    };
  }

  function build(storage?: number): Node {
    const s = state();
    return buildNode(
      deps.facts,
      { ...s, ephemeralStorageBytes: storage },
      deps.clock.now(),
      current,
    );
  }

  const notify = (node: Node) => {
    for (const fn of [...subscribers]) {
      try {
        fn(structuredClone(node));
      } catch (err) {
        deps.logger.warn("node status subscriber failed", { error: err });
      }
    }
  };

  async function update(): Promise<Node> {
    try {
      // An unreachable runtime is reported by the runtime health check (the Ready condition);
      // its version is asked again at the next update.
      if (runtimeVersion === "") runtimeVersion = await deps.runtimeVersion().catch(() => "");
      const storage = await deps.ephemeralStorage().then(
        (bytes) => {
          storageError = undefined;
          return bytes;
        },
        (error: unknown) => {
          const message = error instanceof Error ? error.message : String(error);
          if (message !== storageError) {
            deps.logger.warn(
              "cannot read the root dir's filesystem; no ephemeral-storage capacity",
              {
                error: message,
              },
            );
          }
          storageError = message;
          return undefined;
        },
      );
      const next = build(storage);
      const now = deps.clock.now();
      const report = nodeChanged(current, next) || now - lastReport >= reportMs;
      current = next;
      if (report) {
        lastReport = now;
        notify(next);
      }
    } catch (err) {
      deps.logger.warn("node status update failed", { error: err });
    }
    return structuredClone(last());
  }

  return {
    node: () => structuredClone(last()),
    update,
    subscribe(fn) {
      subscribers.add(fn);
      return () => subscribers.delete(fn);
    },
    async run(signal) {
      await update();
      let lastUpdate = deps.clock.now();
      let wasHealthy = deps.health.healthy();
      const poll = Math.min(deps.healthPollMs ?? 500, updateMs);
      while (!signal.aborted) {
        await sleepQuietly(deps.clock, poll, signal);
        if (signal.aborted) break;
        const healthy = deps.health.healthy();
        if (healthy !== wasHealthy || deps.clock.now() - lastUpdate >= updateMs) {
          wasHealthy = healthy;
          lastUpdate = deps.clock.now();
          await update();
        }
      }
    },
  };
}
