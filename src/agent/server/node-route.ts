// GET /api/v1/nodes (a NodeList of this one node) and GET /api/v1/nodes/{name}.
import { json, StatusError } from "./status.ts";
import type { ServerDeps } from "./types.ts";

export function nodeRoute(deps: ServerDeps, name: string | undefined): Response {
  const node = deps.node?.();
  if (name === undefined) {
    return json({ apiVersion: "v1", kind: "NodeList", metadata: {}, items: node ? [node] : [] });
  }
  if (node === undefined || node.metadata.name !== name) {
    throw new StatusError("NotFound", `nodes "${name}" not found`);
  }
  return json(node);
}
