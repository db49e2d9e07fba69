// The operator API of deploying beyond the Kubernetes API (docs/protocol.md, "What the hub
// serves"): a DaemonSet's rollout view, revision history and rollback.
import { json, StatusError } from "../../api/status.ts";
import { decodeSegment, readJson } from "../http.ts";
import type { Deployer } from "./deployer.ts";

const DS_SUBRESOURCE = /^\/apis\/apps\/v1\/namespaces\/([^/]+)\/daemonsets\/([^/]+)\/([^/]+)$/;

function list(items: unknown[], kind: string, apiVersion = "apps/v1") {
  return { apiVersion, kind, metadata: {}, items };
}

async function subresource(
  deployer: Deployer,
  req: Request,
  namespace: string,
  name: string,
  sub: string,
): Promise<Response> {
  if (sub === "rollout" && req.method === "GET")
    return json(await deployer.rollout(namespace, name));
  if (sub === "history" && req.method === "GET") {
    const ds = deployer.catalog.get(namespace, name);
    if (ds === undefined) throw new StatusError("NotFound", `daemonsets.apps "${name}" not found`);
    return json(list(deployer.catalog.controllerRevisions(ds), "ControllerRevisionList"));
  }
  if (sub === "rollback" && req.method === "POST") {
    const body = (await readJson(req, 4096)) as { toRevision?: unknown } | null;
    const to = body?.toRevision;
    if (to !== undefined && (typeof to !== "number" || !Number.isInteger(to) || to < 0))
      throw new StatusError(
        "BadRequest",
        `toRevision must be a revision number, got ${JSON.stringify(to)}`,
      );
    const r = await deployer.undo(namespace, name, to);
    return json({ daemonSet: r.daemonSet, revision: r.target.revision, changed: r.changed });
  }
  throw new StatusError(
    "MethodNotAllowed",
    `${req.method} ${new URL(req.url).pathname} is not allowed`,
  );
}

/** Handles a DaemonSet's subresource (rollout, history, rollback), or returns undefined when
 * `path` is not one. The DaemonSets themselves, ConfigMaps and Secrets are the Kubernetes API's
 * (kube/). */
export async function handleDeployApi(
  deployer: Deployer,
  req: Request,
  path: string,
): Promise<Response | undefined> {
  const m = DS_SUBRESOURCE.exec(path);
  if (m === null) return undefined;
  const [ns, name, sub] = [m[1], m[2], m[3]].map((x) => decodeSegment(x ?? ""));
  return subresource(deployer, req, ns ?? "", name ?? "", sub ?? "");
}
