// What the fleet view checks of an agent's message, and the Node it starts from.
import type { Node } from "../api/node.ts";
import type { SequencedMessage } from "../protocol/index.ts";

/** Why a message of node `name` speaks for another node, or undefined. */
export function checkOwner(name: string, msg: SequencedMessage): string | undefined {
  if (msg.type === "node" && msg.node.metadata.name !== name)
    return `node "${name}" cannot report node "${msg.node.metadata.name}"`;
  if (msg.type === "pod.upsert") {
    const other = msg.pod.spec.nodeName;
    if (other !== undefined && other !== "" && other !== name)
      return `node "${name}" cannot report pod "${msg.pod.metadata.name}" of node "${other}"`;
  }
  if (msg.type === "event") {
    const host = msg.event.source.host;
    if (host !== undefined && host !== "" && host !== name)
      return `node "${name}" cannot report an event of node "${host}"`;
  }
  return undefined;
}

export function emptyNode(name: string): Node {
  return { apiVersion: "v1", kind: "Node", metadata: { name }, spec: {}, status: {} };
}
