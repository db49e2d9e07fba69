// Creates the agent's node status manager from its config and the managers it reads.
import type { ContainerImage } from "../../api/node.ts";
import type { ResourceList } from "../../api/types.ts";
import type { CriRuntime } from "../../cri/index.ts";
import type { Clock } from "../../util/clock.ts";
import type { Logger } from "../../util/log.ts";
import type { AgentConfig } from "../config/index.ts";
import { filesystemBytes, gatherNodeFacts } from "./facts.ts";
import { createNodeStatusManager, type NodeStatusDeps, type NodeStatusManager } from "./manager.ts";

export interface AgentNodeStatusInput {
  config: AgentConfig;
  hostIP: string;
  version: string;
  cri: Pick<CriRuntime, "version">;
  health: { healthy(): boolean; reasons(): string[] };
  clock: Clock;
  logger: Logger;
  /** Allocatable from the container manager (reservations and eviction thresholds). */
  allocatable?: () => ResourceList;
  /** The images on the node, for Node.status.images. */
  images?: () => ContainerImage[] | undefined;
  /** Extended resources from the device manager. */
  devices?: NodeStatusDeps["devices"];
  /** Memory/disk/PID pressure from the eviction manager. */
  pressure?: NodeStatusDeps["pressure"];
  /** The node's PSI as annotation texts. */
  psi?: NodeStatusDeps["psi"];
}

/** Gathers the static facts once and returns the manager (not yet running). */
export async function createAgentNodeStatus(
  input: AgentNodeStatusInput,
): Promise<NodeStatusManager> {
  const { config } = input;
  const facts = await gatherNodeFacts({
    nodeName: config.nodeName,
    hostIP: input.hostIP,
    version: input.version,
    maxPods: config.maxPods,
    configLabels: config.nodeLabels,
    logger: input.logger,
    clock: input.clock,
  });
  return createNodeStatusManager({
    clock: input.clock,
    logger: input.logger,
    facts,
    health: input.health,
    runtimeVersion: async () => {
      const v = await input.cri.version({}, { timeoutMs: 5000 });
      return `${v.runtimeName}://${v.runtimeVersion}`;
    },
    ephemeralStorage: () => filesystemBytes(config.rootDir),
    ...(input.allocatable !== undefined && { allocatable: input.allocatable }),
    ...(input.images !== undefined && { images: input.images }),
    ...(input.devices !== undefined && { devices: input.devices }),
    ...(input.pressure !== undefined && { pressure: input.pressure }),
    ...(input.psi !== undefined && { psi: input.psi }),
    updateFrequencyMs: config.nodeStatusUpdateFrequency,
  });
}

/** The node's pressure as its conditions show it, from the eviction manager's conditions. */
export function pressureOf(
  conditions: () => readonly string[],
): NonNullable<NodeStatusDeps["pressure"]> {
  return () => {
    const c = conditions();
    return {
      memory: c.includes("MemoryPressure"),
      disk: c.includes("DiskPressure"),
      pid: c.includes("PIDPressure"),
    };
  };
}

/**
 * The node status manager as the eviction manager reaches it, created before it (the node's
 * pressure is the eviction manager's): bound once the node status manager exists. Called before
 * that, it throws.
 */
export class NodeStatusPort {
  private manager: NodeStatusManager | undefined;

  bind(manager: NodeStatusManager): void {
    this.manager = manager;
  }

  /** Builds and publishes the node again (its pressure conditions changed). */
  update(): void {
    if (this.manager === undefined) throw new Error("the node status manager is not created yet");
    void this.manager.update();
  }
}
