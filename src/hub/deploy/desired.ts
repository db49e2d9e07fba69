// Each device's desired state (docs/protocol.md, "Desired state"): built from the revisions
// assigned to it and the ConfigMaps and Secrets their pods reference, versioned by a generation
// that rises by one when the content changes (a content hash tells, across hub restarts), and
// sent as one `desired` message text — without its Secrets over a connection that is neither
// TLS nor loopback.
import { createHash } from "node:crypto";
import type { DaemonSet, PodTemplateSpec } from "../../api/daemonset.ts";
import { type ConfigObject, objectKey, objectsUsedBy } from "../../api/pod-objects.ts";
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
  /** Records whether the node was last sent its state without its Secrets; whether that
   * changed. */
  setSecretsWithheld(name: string, withheld: boolean): boolean;
}

/** Message texts up to this size are kept between sends; larger ones are made for each send. */
const MAX_CACHED_TEXT = 64 * 1024;

export interface DesiredContent {
  pods: Pod[];
  podsJson: string;
  configMaps: ConfigObject[];
  secrets: ConfigObject[];
  /** Over the pods and the objects' resourceVersions (objects are not hashed whole). */
  hash: string;
}

/** The desired content of a device. */
function desiredContent(
  node: string,
  assigned: readonly AssignedPod[],
  lookup: (key: string) => ConfigObject | undefined,
): DesiredContent {
  const pods: Pod[] = [...assigned]
    .sort((a, b) =>
      `${a.ds.metadata.namespace}/${a.ds.metadata.name}`.localeCompare(
        `${b.ds.metadata.namespace}/${b.ds.metadata.name}`,
      ),
    )
    .map((a) => podFor(a.ds, a.template, a.hash, node));
  const keys = [...new Set(pods.flatMap((p) => [...objectsUsedBy(p)]))].sort();
  const objects = keys.flatMap((k) => lookup(k) ?? []);
  const podsJson = JSON.stringify(pods);
  const versions = objects.map((o) => `${objectKey(o)}@${o.metadata.resourceVersion}`).join(",");
  return {
    pods,
    podsJson,
    configMaps: objects.filter((o) => o.kind === "ConfigMap"),
    secrets: objects.filter((o) => o.kind === "Secret"),
    hash: createHash("sha256").update(`${podsJson}\n${versions}`).digest("hex").slice(0, 16),
  };
}

function messageText(generation: number, c: DesiredContent, withSecrets: boolean): string {
  const cms = c.configMaps.length > 0 ? `,"configMaps":${JSON.stringify(c.configMaps)}` : "";
  const secrets =
    withSecrets && c.secrets.length > 0 ? `,"secrets":${JSON.stringify(c.secrets)}` : "";
  return `{"type":"desired","generation":${generation},"pods":${c.podsJson}${cms}${secrets}}`;
}

export class DesiredStates {
  /** The message text of each device's current generation (small ones only), and whether
   * that state holds Secrets. */
  private readonly texts = new Map<string, { text?: string; hasSecrets: boolean }>();

  constructor(
    private readonly fleet: DesiredWriter,
    private readonly assignedPods: (node: string) => AssignedPod[],
    private readonly lookup: (key: string) => ConfigObject | undefined,
  ) {}

  private content(node: string): DesiredContent {
    return desiredContent(node, this.assignedPods(node), this.lookup);
  }

  private remember(node: string, generation: number, c: DesiredContent): void {
    const text = messageText(generation, c, true);
    const hasSecrets = c.secrets.length > 0;
    this.texts.set(node, text.length <= MAX_CACHED_TEXT ? { text, hasSecrets } : { hasSecrets });
  }

  /**
   * Rebuilds the device's content; returns its new generation when it changed, else undefined.
   * A device that never had a desired state and has no pods stays at generation 0.
   */
  rebuild(node: string): number | undefined {
    const rec = this.fleet.nodes.get(node);
    if (rec === undefined) return undefined;
    const c = this.content(node);
    if (c.hash === rec.desiredHash) return undefined;
    if (rec.desiredHash === undefined && rec.desiredGeneration === 0 && c.pods.length === 0)
      return undefined;
    const generation = rec.desiredGeneration + 1;
    this.fleet.setDesired(node, generation, c.hash);
    this.remember(node, generation, c);
    return generation;
  }

  /**
   * Raises the device's generation above `agentGeneration` (a hub restored from an older
   * copy); true when it did.
   */
  raiseAbove(node: string, agentGeneration: number): boolean {
    const rec = this.fleet.nodes.get(node);
    if (rec === undefined || agentGeneration <= rec.desiredGeneration) return false;
    const c = this.content(node);
    this.fleet.setDesired(node, agentGeneration + 1, c.hash);
    this.remember(node, agentGeneration + 1, c);
    return true;
  }

  /**
   * The `desired` message of the device's current generation (undefined at generation 0), and
   * whether Secrets were left out because the connection is not `secure`.
   */
  message(node: string, secure: boolean): { text: string; withheld: boolean } | undefined {
    const rec = this.fleet.nodes.get(node);
    if (rec === undefined || rec.desiredGeneration === 0) return undefined;
    const cached = this.texts.get(node);
    if (cached?.text !== undefined && (secure || !cached.hasSecrets))
      return { text: cached.text, withheld: false };
    const c = this.content(node);
    if (cached === undefined) this.remember(node, rec.desiredGeneration, c);
    const withheld = !secure && c.secrets.length > 0;
    return { text: messageText(rec.desiredGeneration, c, !withheld), withheld };
  }

  forget(node: string): void {
    this.texts.delete(node);
  }
}
