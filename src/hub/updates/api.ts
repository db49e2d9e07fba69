// The per-node update routes (docs/hub-releases.md, "Updating one node"), for the operator:
//   PUT    /api/v1/nodes/<name>/update   {"version": "0.2.0"}: the release the node should run
//   DELETE /api/v1/nodes/<name>/update   cancels it (the device keeps what it runs)
//   GET    /api/v1/nodes/<name>/update   the node's update
//   GET    /api/v1/updates               every node with a wanted release or a reported status
import { z } from "zod";
import { json, StatusError } from "../../api/status.ts";
import { describeZodError } from "../../protocol/index.ts";
import { decodeSegment, readJson } from "../http.ts";
import type { NodeUpdates } from "./updates.ts";

const UPDATES_PATH = "/api/v1/updates";

const NODE_UPDATE = /^\/api\/v1\/nodes\/([^/]+)\/update$/;

const setSchema = z.object({ version: z.string().min(1).max(64) });

export interface UpdateApiDeps {
  updates: NodeUpdates;
  maxBodyBytes: number;
  /** The agent rollout `node` is a member of, if any: its wish is the rollout's. */
  rolloutOf(node: string): string | undefined;
  /** The wanted release of `node` changed: offer it to its agent, if connected. */
  changed(node: string): void;
  /** Writes a set or cancel, by the operator's `req`, to the audit log with its outcome. */
  audit(
    req: Request,
    action: "set" | "cancel",
    node: string,
    version: string,
    outcome: string,
  ): Promise<void>;
}

/** Handles an update route of the operator (checked by the caller); undefined for other paths. */
export async function handleUpdateApi(
  deps: UpdateApiDeps,
  req: Request,
  path: string,
): Promise<Response | undefined> {
  if (path === UPDATES_PATH) {
    if (req.method !== "GET")
      throw new StatusError("MethodNotAllowed", `${req.method} ${path} is not allowed`);
    return list(deps);
  }
  const m = NODE_UPDATE.exec(path);
  if (m === null) return undefined;
  const node = decodeSegment(m[1] ?? "");
  if (req.method === "GET") {
    const [view] = await deps.updates.views(node);
    return json(view);
  }
  if (req.method === "PUT") return set(deps, req, node);
  if (req.method === "DELETE") return cancel(deps, req, node);
  throw new StatusError("MethodNotAllowed", `${req.method} ${path} is not allowed`);
}

async function list(deps: UpdateApiDeps): Promise<Response> {
  const items = await deps.updates.views();
  return json({ apiVersion: "fleetlet.io/v1", kind: "NodeUpdateList", items });
}

async function set(deps: UpdateApiDeps, req: Request, node: string): Promise<Response> {
  const body = setSchema.safeParse(await readJson(req, deps.maxBodyBytes));
  if (!body.success)
    throw new StatusError("BadRequest", `bad update: ${describeZodError(body.error)}`);
  const version = body.data.version;
  try {
    inRollout(deps, node);
    await deps.updates.set(node, version);
  } catch (err) {
    await deps.audit(req, "set", node, version, `refused: ${(err as Error).message}`);
    throw err;
  }
  await deps.audit(req, "set", node, version, "set");
  deps.changed(node);
  const [view] = await deps.updates.views(node);
  return json(view);
}

/** Refuses (409) a per-node update of a member of an agent rollout. */
function inRollout(deps: UpdateApiDeps, node: string): void {
  const rollout = deps.rolloutOf(node);
  if (rollout !== undefined)
    throw new StatusError(
      "Conflict",
      `node ${node} is in agent rollout ${rollout}: change the rollout (fleetlet hub upgrade), or delete it first`,
    );
}

async function cancel(deps: UpdateApiDeps, req: Request, node: string): Promise<Response> {
  const version = deps.updates.wantedFor(node)?.version ?? "";
  try {
    inRollout(deps, node);
  } catch (err) {
    await deps.audit(req, "cancel", node, version, `refused: ${(err as Error).message}`);
    throw err;
  }
  const canceled = await deps.updates.cancel(node);
  await deps.audit(req, "cancel", node, version, canceled ? "canceled" : "none was wanted");
  return json({ node, canceled });
}
