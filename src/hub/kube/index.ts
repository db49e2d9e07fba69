// The hub's Kubernetes API (docs/kubectl.md): discovery, OpenAPI, and each resource at its
// Kubernetes path, read (list, get, watch, tables) and written (create, replace, patch, delete)
// as the API server does. The caller checks who is asking; paths that are not the API's, or
// that other parts of the hub answer (a DaemonSet's rollout, a node's revoke), are left to it.
import { validateDaemonSet } from "../../api/daemonset.ts";
import type { ConfigObject } from "../../api/pod-objects.ts";
import { StatusError } from "../../api/status.ts";
import { validateConfigMap, validateSecret } from "../../api/validate-objects.ts";
import type { Clock } from "../../util/clock.ts";
import type { Deployer } from "../deploy/deployer.ts";
import type { ChangeLog } from "./changes.ts";
import { discovery } from "./discovery.ts";
import { getResponse, listResponse, type ReadContext } from "./reads.ts";
import {
  findResource,
  hubResources,
  type KubeObject,
  type KubeResource,
  type ResourceDeps,
} from "./resources.ts";
import { type Writer, writeResponse } from "./writes.ts";

export { ChangeLog } from "./changes.ts";

/** A request's target: /api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUB]] or /apis/GROUP/v1/... */
export interface KubePath {
  group: string;
  namespace?: string;
  resource: string;
  name?: string;
  sub?: string;
}

export function parseKubePath(path: string): KubePath | undefined {
  const m = /^\/(?:api\/v1|apis\/([^/]+)\/v1)\/(.+)$/.exec(path);
  if (m === null) return undefined;
  const group = m[1] ?? "";
  let parts: string[];
  try {
    parts = (m[2] ?? "").split("/").map(decodeURIComponent);
  } catch {
    return undefined;
  }
  let namespace: string | undefined;
  if (parts[0] === "namespaces" && parts.length >= 3) {
    namespace = parts[1];
    parts = parts.slice(2);
  }
  const [resource, name, sub, ...extra] = parts;
  if (resource === undefined || resource === "" || extra.length > 0) return undefined;
  return {
    group,
    resource,
    ...(namespace !== undefined && { namespace }),
    ...(name !== undefined && { name }),
    ...(sub !== undefined && { sub }),
  };
}

export interface KubeApiDeps extends ResourceDeps {
  deployer: ResourceDeps["deployer"] &
    Pick<Deployer, "apply" | "delete" | "applyObject" | "deleteObject">;
  changes: ChangeLog;
  clock: Clock;
  /** Period of watches that compare lists (DaemonSets, ConfigMaps, Secrets); 500 ms. */
  pollMs?: number;
  /** PATCH and DELETE of a node (the hub's labels; revoking). */
  node: {
    patch(req: Request, name: string): Promise<Response>;
    delete(name: string): Promise<Response>;
  };
}

function writers(d: KubeApiDeps): Record<string, Writer> {
  const config = (kind: ConfigObject["kind"]): Writer => ({
    decode(body) {
      const r = kind === "ConfigMap" ? validateConfigMap(body) : validateSecret(body);
      return r.ok ? { ok: true, object: r.object as KubeObject } : r;
    },
    async apply(o) {
      const a = await d.deployer.applyObject(o as ConfigObject);
      return { object: a.object as KubeObject, result: a.result };
    },
    delete: async (ns, name) => (await d.deployer.deleteObject(kind, ns, name)) as KubeObject,
    ...(kind === "Secret" && { consumed: ["stringData"] }),
  });
  return {
    configmaps: config("ConfigMap"),
    secrets: config("Secret"),
    daemonsets: {
      decode(body) {
        const r = validateDaemonSet(body);
        return r.ok ? { ok: true, object: r.daemonSet as KubeObject } : r;
      },
      async apply(o) {
        const a = await d.deployer.apply(o as Parameters<Deployer["apply"]>[0]);
        return { object: a.daemonSet as KubeObject, result: a.result };
      },
      delete: async (ns, name) => (await d.deployer.delete(ns, name)) as KubeObject,
    },
  };
}

export interface KubeApi {
  readonly resources: KubeResource[];
  /** Answers `req` when it is the Kubernetes API's to answer; undefined otherwise. */
  handle(req: Request, url: URL): Promise<Response> | Response | undefined;
}

export function createKubeApi(d: KubeApiDeps): KubeApi {
  const resources = hubResources(d);
  const write = writers(d);
  const ctx: ReadContext = { changes: d.changes, clock: d.clock, pollMs: d.pollMs ?? 500 };
  const route = (req: Request, url: URL, p: KubePath): Promise<Response> | Response | undefined => {
    const r = findResource(resources, p.group, p.resource);
    if (r === undefined || p.sub !== undefined) return undefined;
    if (r.namespaced === false && p.namespace !== undefined)
      throw new StatusError("NotFound", `${r.name} are not namespaced`);
    const q = url.searchParams;
    if (r.name === "nodes" && p.name !== undefined && req.method === "PATCH")
      return d.node.patch(req, p.name);
    if (r.name === "nodes" && p.name !== undefined && req.method === "DELETE")
      return d.node.delete(p.name);
    if (req.method === "GET") {
      if (p.name === undefined) return listResponse(ctx, r, p.namespace, req, q);
      return getResponse(ctx, r, p.namespace ?? "", p.name, req, q);
    }
    const w = write[r.name];
    if (w === undefined)
      throw new StatusError(
        "MethodNotAllowed",
        r.name === "pods"
          ? `${req.method} of pods is not allowed: pods are run by devices, from their manifest folders or a DaemonSet of the hub`
          : `${req.method} is not allowed on ${r.name}`,
      );
    return writeResponse(w, r, req, q, p.namespace, p.name);
  };
  return {
    resources,
    handle(req, url) {
      const path = url.pathname.replace(/\/+$/, "") || "/";
      const found = discovery(path, req, resources, new Date(d.clock.now()));
      if (found !== undefined) return found;
      const p = parseKubePath(path);
      if (p === undefined) return undefined;
      if (p.resource === "namespaces" && p.name === undefined) return undefined;
      return route(req, url, p);
    },
  };
}
