// Each device's desired state (docs/protocol.md, "Desired state"): built from the revisions
// assigned to it, versioned by a generation that rises by one when the content changes (a
// content hash tells, across hub restarts), and sent as one `desired` message text.
import { createHash } from "node:crypto";
import type { DaemonSet, PodTemplateSpec } from "../../api/daemonset.ts";
import type { Pod } from "../../api/types.ts";
import type { NodeRecord } from "../store.ts";
import { podFor } from "./pods.ts";

/** One pod of a device's desired state: its DaemonSet and the revision it runs. */
export interface AssignedPod {
  ds: DaemonSet;
  hash: string;
  template: PodTemplateSpec;
}

export interface DesiredWriter {
  readonly nodes: ReadonlyMap<string, NodeRecord>;
  /** Records a new generation and content hash for the node (persisted by the caller). */
  setDesired(name: string, generation: number, hash: string): void;
}

/** The desired content of a device and its hash. */
export function desiredContent(node: string, assigned: readonly AssignedPod[]) {
  const pods: Pod[] = [...assigned]
    .sort((a, b) =>
      `${a.ds.metadata.namespace}/${a.ds.metadata.name}`.localeCompare(
        `${b.ds.metadata.namespace}/${b.ds.metadata.name}`,
      ),
    )
    .map((a) => podFor(a.ds, a.template, a.hash, node));
  const json = JSON.stringify(pods);
  return { pods, json, hash: createHash("sha256").update(json).digest("hex").slice(0, 16) };
}

export class DesiredStates {
  /** The message text of each device's current generation, made when first needed. */
  private readonly texts = new Map<string, string>();

  constructor(
    private readonly fleet: DesiredWriter,
    private readonly assignedPods: (node: string) => AssignedPod[],
  ) {}

  /**
   * Rebuilds the device's content; returns its new generation when it changed, else undefined.
   * A device that never had a desired state and has no pods stays at generation 0.
   */
  rebuild(node: string): number | undefined {
    const rec = this.fleet.nodes.get(node);
    if (rec === undefined) return undefined;
    const content = desiredContent(node, this.assignedPods(node));
    if (content.hash === rec.desiredHash) return undefined;
    if (rec.desiredHash === undefined && rec.desiredGeneration === 0 && content.pods.length === 0)
      return undefined;
    const generation = rec.desiredGeneration + 1;
    this.fleet.setDesired(node, generation, content.hash);
    this.texts.set(node, this.text(generation, content.json));
    return generation;
  }

  /**
   * Raises the device's generation above `agentGeneration` (a hub restored from an older
   * copy); true when it did.
   */
  raiseAbove(node: string, agentGeneration: number): boolean {
    const rec = this.fleet.nodes.get(node);
    if (rec === undefined || agentGeneration <= rec.desiredGeneration) return false;
    const content = desiredContent(node, this.assignedPods(node));
    this.fleet.setDesired(node, agentGeneration + 1, content.hash);
    this.texts.set(node, this.text(agentGeneration + 1, content.json));
    return true;
  }

  /** The `desired` message of the device's current generation (undefined at generation 0). */
  message(node: string): string | undefined {
    const rec = this.fleet.nodes.get(node);
    if (rec === undefined || rec.desiredGeneration === 0) return undefined;
    let text = this.texts.get(node);
    if (text === undefined) {
      text = this.text(rec.desiredGeneration, desiredContent(node, this.assignedPods(node)).json);
      this.texts.set(node, text);
    }
    return text;
  }

  forget(node: string): void {
    this.texts.delete(node);
  }

  private text(generation: number, podsJson: string): string {
    return `{"type":"desired","generation":${generation},"pods":${podsJson}}`;
  }
}
