// The hub's desired state on this device, as the hub client's handler: the "api" source of pods
// and of ConfigMaps and Secrets, kept in <rootDir>/hub/desired.json.
import { join } from "node:path";
import type { Logger } from "../../util/log.ts";
import type { AgentConfig } from "../config/index.ts";
import type { StateWrites } from "../events/state-writes.ts";
import { createHubPodSource, type ObjectStore, type PodConfig } from "../sources/index.ts";
import type { DesiredHandler } from "./desired.ts";

/**
 * The hub's desired state on this device: the "api" source of pods and of ConfigMaps and
 * Secrets, loaded from its saved file now (so an offline start runs the last hub pods), as the
 * hub client's handler.
 */
export function hubDesiredState(
  config: AgentConfig,
  podConfig: PodConfig,
  objects: ObjectStore,
  log: Logger,
  stateWrites?: StateWrites,
): DesiredHandler {
  const source = createHubPodSource({
    ...(stateWrites !== undefined && { stateWrites }),
    nodeName: config.nodeName,
    path: join(config.rootDir, "hub", "desired.json"),
    log: log.with({ component: "hubsource" }),
    apply: (pods) => podConfig.set("api", pods),
    applyObjects: (list) => objects.set("api", list),
  });
  source.load();
  return {
    get generation() {
      return source.generation;
    },
    accept: (input) => source.accept(input),
    conflicts: () =>
      podConfig.conflicts("api").map((c) => ({ pod: c.pod, uid: c.uid, message: c.message })),
  };
}

/**
 * The hub client as the pod config reaches it, created long before the client (which starts
 * only once the runtime was listed): bound when the client is created. Until then, and when no
 * hub is configured, a change of the hub's refused pods has no one to tell.
 */
export class HubPort {
  private hub: { desiredChanged(): void; connected(): boolean } | undefined;

  bind(hub: { desiredChanged(): void; connected(): boolean } | undefined): void {
    this.hub = hub;
  }

  /** Whether the hub client's connection is welcomed. */
  connected(): boolean {
    return this.hub?.connected() ?? false;
  }

  /** The refused hub pods changed: the hub client reports its desired state again. */
  desiredChanged(): void {
    this.hub?.desiredChanged();
  }
}
