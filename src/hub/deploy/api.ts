// The operator API of deploying (docs/protocol.md, "What the hub serves"): DaemonSets under
// Kubernetes' paths, their rollout view, revision history and rollback. Objects are validated as
// the API server does before anything is stored; a refusal is a 422 `Invalid` Status whose
// message lists the field errors.
import { validateDaemonSet } from "../../api/daemonset.ts";
import { DEFAULT_NAMESPACE, formatInvalidObject } from "../../api/index.ts";
import type { ConfigObject } from "../../api/pod-objects.ts";
import { json, StatusError } from "../../api/status.ts";
import { validateConfigMap, validateSecret } from "../../api/validate-objects.ts";
import { readJson } from "../http.ts";
import type { Deployer } from "./deployer.ts";

/** The largest object body the hub takes (a ConfigMap may hold up to 1 MiB of data). */
export const MAX_OBJECT_BYTES = 3 * 1024 * 1024;

/** The header saying what an apply did: created, configured or unchanged. */
export const APPLY_RESULT_HEADER = "fleetlet-apply";

const DS_PATH =
  /^\/apis\/apps\/v1(?:\/namespaces\/([^/]+))?\/daemonsets(?:\/([^/]+)(?:\/([^/]+))?)?$/;

const CONFIG_PATH = /^\/api\/v1(?:\/namespaces\/([^/]+))?\/(configmaps|secrets)(?:\/([^/]+))?$/;

function list(items: unknown[], kind: string, apiVersion = "apps/v1") {
  return { apiVersion, kind, metadata: {}, items };
}

/** The request's object, whose name and namespace (if given) must be the URL's. */
async function bodyFor(req: Request, namespace: string, name: string): Promise<unknown> {
  const body = await readJson(req, MAX_OBJECT_BYTES);
  const meta = (body as { metadata?: { name?: unknown; namespace?: unknown } } | null)?.metadata;
  if (meta?.name !== undefined && meta.name !== name)
    throw new StatusError(
      "BadRequest",
      `the name in the body ("${String(meta.name)}") differs from the URL ("${name}")`,
    );
  if (meta?.namespace !== undefined && meta.namespace !== namespace)
    throw new StatusError(
      "BadRequest",
      `the namespace in the body ("${String(meta.namespace)}") differs from the URL ("${namespace}")`,
    );
  return body;
}

function applied<T>(object: T, result: string): Response {
  const res = json(object, result === "created" ? 201 : 200);
  res.headers.set(APPLY_RESULT_HEADER, result);
  return res;
}

async function put(deployer: Deployer, req: Request, namespace: string, name: string) {
  const body = await bodyFor(req, namespace, name);
  const r = validateDaemonSet(body);
  if (!r.ok) throw new StatusError("Invalid", formatInvalidObject("DaemonSet", name, r.errors));
  const a = deployer.apply({
    ...r.daemonSet,
    metadata: { ...r.daemonSet.metadata, name, namespace },
  });
  return applied(a.daemonSet, a.result);
}

/** ConfigMaps and Secrets: GET (one or a list), PUT (create or replace), DELETE. */
async function configRoute(
  deployer: Deployer,
  req: Request,
  m: RegExpExecArray,
): Promise<Response> {
  const kind: ConfigObject["kind"] = m[2] === "configmaps" ? "ConfigMap" : "Secret";
  const namespace = m[1] === undefined ? undefined : decodeURIComponent(m[1]);
  const name = m[3] === undefined ? undefined : decodeURIComponent(m[3]);
  const notFound = () => new StatusError("NotFound", `${m[2]} "${name}" not found`);
  if (name === undefined) {
    if (req.method !== "GET")
      throw new StatusError("MethodNotAllowed", `${req.method} is not allowed here`);
    return json(list(deployer.objects.list(kind, namespace), `${kind}List`, "v1"));
  }
  const ns = namespace ?? "default";
  switch (req.method) {
    case "GET": {
      const o = deployer.objects.get(`${kind}/${ns}/${name}`);
      if (o === undefined) throw notFound();
      return json(o);
    }
    case "PUT": {
      const body = await bodyFor(req, ns, name);
      const r = kind === "ConfigMap" ? validateConfigMap(body) : validateSecret(body);
      if (!r.ok) throw new StatusError("Invalid", formatInvalidObject(kind, name, r.errors));
      const a = deployer.applyObject({
        ...r.object,
        metadata: { ...r.object.metadata, name, namespace: ns },
      });
      return applied(a.object, a.result);
    }
    case "DELETE":
      return json(deployer.deleteObject(kind, ns, name));
    default:
      throw new StatusError("MethodNotAllowed", `${req.method} is not allowed here`);
  }
}

async function subresource(
  deployer: Deployer,
  req: Request,
  namespace: string,
  name: string,
  sub: string,
): Promise<Response> {
  if (sub === "rollout" && req.method === "GET") return json(deployer.rollout(namespace, name));
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
    const r = deployer.undo(namespace, name, to);
    return json({ daemonSet: r.daemonSet, revision: r.target.revision, changed: r.changed });
  }
  throw new StatusError(
    "MethodNotAllowed",
    `${req.method} ${new URL(req.url).pathname} is not allowed`,
  );
}

/** Handles a deploy route, or returns undefined when `path` is not one. */
export async function handleDeployApi(
  deployer: Deployer,
  req: Request,
  path: string,
): Promise<Response | undefined> {
  const config = CONFIG_PATH.exec(path);
  if (config !== null) return configRoute(deployer, req, config);
  const m = DS_PATH.exec(path);
  if (m === null) return undefined;
  const namespace = m[1] === undefined ? undefined : decodeURIComponent(m[1]);
  const name = m[2] === undefined ? undefined : decodeURIComponent(m[2]);
  if (name === undefined) {
    if (req.method !== "GET")
      throw new StatusError("MethodNotAllowed", `${req.method} ${path} is not allowed`);
    return json(list(deployer.list(namespace), "DaemonSetList"));
  }
  const ns = namespace ?? DEFAULT_NAMESPACE;
  if (namespace === undefined)
    throw new StatusError(
      "NotFound",
      `the hub serves no ${path}; use /apis/apps/v1/namespaces/NS/daemonsets/NAME`,
    );
  if (m[3] !== undefined) return subresource(deployer, req, ns, name, m[3]);
  switch (req.method) {
    case "GET": {
      const ds = deployer.get(ns, name);
      if (ds === undefined)
        throw new StatusError("NotFound", `daemonsets.apps "${name}" not found`);
      return json(ds);
    }
    case "PUT":
      return put(deployer, req, ns, name);
    case "DELETE":
      return json(deployer.delete(ns, name));
    default:
      throw new StatusError("MethodNotAllowed", `${req.method} ${path} is not allowed`);
  }
}
