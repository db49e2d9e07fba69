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
  /** Extended resources from the device manager; none when absent. */
  devices?: () => NodeState["devices"];
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
  return new NodeStatus(deps);
}

class NodeStatus implements NodeStatusManager {
  private readonly updateMs: number;
  private readonly reportMs: number;
  private readonly subscribers = new Set<(node: Node) => void>();
  /** The runtime's version; "" until the runtime answers. */
  private runtimeVersion = "";
  /** The last error reading the root dir's filesystem, logged once until a read succeeds. */
  private storageError: string | undefined;
  /** The last built Node. */
  private current: Node;
  /** When subscribers were last told. */
  private lastReport = Number.NEGATIVE_INFINITY;

  constructor(private readonly deps: NodeStatusDeps) {
    this.updateMs = deps.updateFrequencyMs ?? 10_000;
    this.reportMs = deps.reportFrequencyMs ?? 5 * 60_000;
    this.current = this.build(undefined, undefined);
  }

  node(): Node {
    return structuredClone(this.current);
  }

  subscribe(fn: (node: Node) => void): () => void {
    this.subscribers.add(fn);
    return () => this.subscribers.delete(fn);
  }

  async update(): Promise<Node> {
    try {
      // An unreachable runtime is reported by the runtime health check (the Ready condition);
      // its version is asked again at the next update.
      if (this.runtimeVersion === "") {
        this.runtimeVersion = await this.deps.runtimeVersion().catch(() => "");
      }
      const next = this.build(await this.readStorage(), this.current);
      const now = this.deps.clock.now();
      const report = nodeChanged(this.current, next) || now - this.lastReport >= this.reportMs;
      this.current = next;
      if (report) {
        this.lastReport = now;
        this.notify(next);
      }
    } catch (err) {
      this.deps.logger.warn("node status update failed", { error: err });
    }
    return structuredClone(this.current);
  }

  async run(signal: AbortSignal): Promise<void> {
    const { clock, health } = this.deps;
    await this.update();
    let lastUpdate = clock.now();
    let wasHealthy = health.healthy();
    const poll = Math.min(this.deps.healthPollMs ?? 500, this.updateMs);
    while (!signal.aborted) {
      await sleepQuietly(clock, poll, signal);
      if (signal.aborted) break;
      const healthy = health.healthy();
      if (healthy !== wasHealthy || clock.now() - lastUpdate >= this.updateMs) {
        wasHealthy = healthy;
        lastUpdate = clock.now();
        await this.update();
      }
    }
  }

  /** The root dir's filesystem size; undefined (logged once per error) when it cannot be read. */
  private readStorage(): Promise<number | undefined> {
    return this.deps.ephemeralStorage().then(
      (bytes) => {
        this.storageError = undefined;
        return bytes;
      },
      (error: unknown) => {
        const message = error instanceof Error ? error.message : String(error);
        if (message !== this.storageError) {
          this.deps.logger.warn(
            "cannot read the root dir's filesystem; no ephemeral-storage capacity",
            { error: message },
          );
        }
        this.storageError = message;
        return undefined;
      },
    );
  }

  private build(storage: number | undefined, previous: Node | undefined): Node {
    const deps = this.deps;
    const state: NodeState = {
      runtimeHealthy: deps.health.healthy(),
      runtimeReasons: deps.health.reasons(),
      runtimeVersion: this.runtimeVersion,
      ephemeralStorageBytes: storage,
      ...(deps.allocatable && { allocatable: deps.allocatable() }),
      ...(deps.devices && { devices: deps.devices() }),
      ...(deps.pressure && { pressure: deps.pressure() }),
      ...(deps.images && { images: deps.images() }),
      ...(deps.psi && { psi: deps.psi() }),
    };
    return buildNode(deps.facts, state, deps.clock.now(), previous);
  }

  private notify(node: Node): void {
    for (const fn of [...this.subscribers]) {
      try {
        fn(structuredClone(node));
      } catch (err) {
        this.deps.logger.warn("node status subscriber failed", { error: err });
      }
    }
  }
}
