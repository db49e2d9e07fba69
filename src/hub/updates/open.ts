// The hub's node updates opened over its store, releases and fleet (updates.ts): what the
// fleet knows of each node's update (its arch, the agent's version from its Node), the Node's
// update note, and a share with other replicas that fails, logged.
import type { Logger } from "../../util/log.ts";
import type { Fleet } from "../fleet.ts";
import type { UpdateStore } from "./store.ts";
import { NodeUpdates, type NodeUpdatesDeps, type UpdateNodeFacts } from "./updates.ts";

/** The agent version a node's nodeInfo.kubeletVersion names ("fleetlet/0.2.0" → "0.2.0"). */
function versionFromKubelet(kubeletVersion: string | undefined): string | undefined {
  if (kubeletVersion === undefined || !kubeletVersion.startsWith("fleetlet/")) return undefined;
  return kubeletVersion.slice("fleetlet/".length);
}

/** The node updates over `store` (its wishes loaded), the hub's releases and its fleet; a share
 * with other replicas that fails is logged on `log`. */
export async function openNodeUpdates(
  store: UpdateStore,
  releases: NodeUpdatesDeps["releases"],
  fleet: Pick<Fleet, "nodes" | "setUpdateNote">,
  clock: { now(): number },
  log: Logger,
): Promise<NodeUpdates> {
  const deps: NodeUpdatesDeps = {
    store,
    releases,
    node: (name) => nodeFactsOf(fleet.nodes, name),
    now: () => clock.now(),
    onReport: (node, text) => fleet.setUpdateNote(node, text),
    onShareFailed: (node, error) =>
      log.warn("what an agent said of its update was not shared with the other hub replicas", {
        node,
        error: error instanceof Error ? error.message : String(error),
      }),
  };
  return new NodeUpdates(deps, await store.load(), (await store.loadReports?.()) ?? []);
}

type FleetNodes = Fleet["nodes"];

/** The update facts of node `name` from the fleet's records (undefined: no such node). */
function nodeFactsOf(nodes: FleetNodes, name: string): UpdateNodeFacts | undefined {
  const rec = nodes.get(name);
  if (rec === undefined) return undefined;
  const info = rec.node?.status?.nodeInfo;
  const version = versionFromKubelet(info?.kubeletVersion);
  return {
    ...(info?.architecture !== undefined &&
      info.architecture !== "" && { arch: info.architecture }),
    ...(version !== undefined && { version }),
  };
}
