// The agent rollout routes (docs/hub-releases.md, "Rolling a release out to a fleet"), for the
// operator (the caller checked the token):
//   GET    /api/v1/agentrollouts                      {kind: "AgentRolloutList", items}
//   PUT    /api/v1/agentrollouts/<name>               spec → 201 created, 200 changed: the view
//   GET    /api/v1/agentrollouts/<name>               the view
//   DELETE /api/v1/agentrollouts/<name>               deleted; members keep their wishes
//   POST   /api/v1/agentrollouts/<name>/pause|resume|undo → the view
import { json, StatusError } from "../../api/status.ts";
import { decodeSegment, readJson } from "../http.ts";
import type { AgentRollouts } from "./controller.ts";
import { parseSpec, RESULT_HEADER } from "./spec.ts";

const LIST_PATH = "/api/v1/agentrollouts";
const ONE = /^\/api\/v1\/agentrollouts\/([^/]+)(?:\/(pause|resume|undo))?$/;

type AgentRolloutAction = "create" | "change" | "pause" | "resume" | "undo" | "delete";

export interface AgentRolloutApiDeps {
  rollouts: AgentRollouts;
  maxBodyBytes: number;
  /** Writes an action of the operator's `req` on rollout `name` to the audit log. */
  audit(
    req: Request,
    action: AgentRolloutAction,
    name: string,
    version: string,
    outcome: string,
  ): Promise<void>;
}

/** Handles an agent rollout route; undefined for other paths. */
export async function handleAgentRolloutApi(
  deps: AgentRolloutApiDeps,
  req: Request,
  path: string,
): Promise<Response | undefined> {
  if (path === LIST_PATH) {
    if (req.method !== "GET")
      throw new StatusError("MethodNotAllowed", `${req.method} ${path} is not allowed`);
    return json({
      apiVersion: "fleetlet.io/v1",
      kind: "AgentRolloutList",
      items: deps.rollouts.list(),
    });
  }
  const m = ONE.exec(path);
  if (m === null) return undefined;
  const name = decodeSegment(m[1] ?? "");
  const action = m[2] as "pause" | "resume" | "undo" | undefined;
  if (action !== undefined && req.method === "POST") {
    const view = await deps.rollouts.act(name, action);
    await deps.audit(req, action, name, view.spec.version, view.phase);
    return json(view);
  }
  if (action === undefined && req.method === "GET") return json(deps.rollouts.view(name));
  if (action === undefined && req.method === "PUT") return put(deps, req, name);
  if (action === undefined && req.method === "DELETE") {
    const r = await deps.rollouts.delete(name);
    await deps.audit(req, "delete", name, r.spec.version, "deleted");
    return json({ name, deleted: true });
  }
  throw new StatusError("MethodNotAllowed", `${req.method} ${path} is not allowed`);
}

async function put(deps: AgentRolloutApiDeps, req: Request, name: string): Promise<Response> {
  const body = await readJson(req, deps.maxBodyBytes);
  const version = String((body as { version?: unknown } | null)?.version ?? "");
  const action = deps.rollouts.has(name) ? "change" : "create";
  try {
    const r = await deps.rollouts.put(name, parseSpec(body));
    await deps.audit(req, action, name, version, r.result);
    const res = json(r.view, r.code);
    res.headers.set(RESULT_HEADER, r.result);
    return res;
  } catch (err) {
    await deps.audit(req, action, name, version, `refused: ${(err as Error).message}`);
    throw err;
  }
}
