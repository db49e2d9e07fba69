// Discovery as the API server serves it (docs/kubectl.md): /version, /api, /apis, the
// group-version resource lists, the aggregated discovery documents kubectl asks for first
// (apidiscovery.k8s.io/v2), and an OpenAPI v3 document per group-version that lists the write
// operations with their `fieldValidation` parameter, so kubectl leaves field validation to the
// hub (which refuses unknown fields with fieldValidation=Strict) instead of wanting a schema.
import { StatusError } from "../../api/status.ts";
import { buildInfo } from "../../util/version.ts";
import type { KubeResource } from "./resources.ts";

/** The Kubernetes API level the hub's API follows (kubectl picks its behaviour by it). */
const KUBE_API = { major: "1", minor: "32" } as const;

const AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/** Whether the Accept header asks for aggregated discovery (v2). */
export function wantsAggregated(accept: string | null): boolean {
  return (accept ?? "")
    .split(",")
    .some((a) => /as=APIGroupDiscoveryList/.test(a) && /v=v2\b/.test(a));
}

function jsonResponse(body: unknown, contentType = "application/json"): Response {
  return new Response(JSON.stringify(body), { headers: { "content-type": contentType } });
}

function versionInfo(now: Date): Record<string, string> {
  const info = buildInfo();
  return {
    major: KUBE_API.major,
    minor: KUBE_API.minor,
    gitVersion: `v${KUBE_API.major}.${KUBE_API.minor}.0-fleetlet.${info.version}`,
    gitCommit: info.commit,
    gitTreeState: "clean",
    buildDate: now.toISOString().replace(/\.\d{3}Z$/, "Z"),
    goVersion: `bun${Bun.version}`,
    compiler: "bun",
    platform: `${process.platform}/${process.arch === "x64" ? "amd64" : process.arch}`,
  };
}

const groupVersion = (group: string) => (group === "" ? "v1" : `${group}/v1`);

/** The APIResourceList of one group-version (legacy discovery). */
function resourceList(group: string, resources: KubeResource[]) {
  const items = resources
    .filter((r) => r.group === group)
    .flatMap((r) => [
      {
        name: r.name,
        singularName: r.singular,
        namespaced: r.namespaced,
        kind: r.kind,
        verbs: r.verbs,
        ...(r.shortNames !== undefined && { shortNames: r.shortNames }),
        ...(r.categories !== undefined && { categories: r.categories }),
      },
      ...(r.subresources ?? []).map((s) => ({
        name: `${r.name}/${s.name}`,
        singularName: "",
        namespaced: r.namespaced,
        kind: s.kind,
        verbs: s.verbs,
      })),
    ]);
  return {
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion: groupVersion(group),
    resources: items,
  };
}

/** One group in aggregated discovery (apidiscovery.k8s.io/v2 APIGroupDiscovery). */
function groupDiscovery(group: string, resources: KubeResource[]) {
  return {
    metadata: { name: group, creationTimestamp: null },
    versions: [
      {
        version: "v1",
        freshness: "Current",
        resources: resources
          .filter((r) => r.group === group)
          .map((r) => ({
            resource: r.name,
            responseKind: { group, version: "v1", kind: r.kind },
            scope: r.namespaced ? "Namespaced" : "Cluster",
            singularResource: r.singular,
            verbs: r.verbs,
            ...(r.shortNames !== undefined && { shortNames: r.shortNames }),
            ...(r.categories !== undefined && { categories: r.categories }),
            ...(r.subresources !== undefined && {
              subresources: r.subresources.map((s) => ({
                subresource: s.name,
                responseKind: { group: "", version: "v1", kind: s.kind },
                verbs: s.verbs,
              })),
            }),
          })),
      },
    ],
  };
}

function aggregated(groups: string[], resources: KubeResource[]): Response {
  return jsonResponse(
    {
      kind: "APIGroupDiscoveryList",
      apiVersion: "apidiscovery.k8s.io/v2",
      metadata: {},
      items: groups.map((g) => groupDiscovery(g, resources)),
    },
    AGGREGATED,
  );
}

const namedGroups = (resources: KubeResource[]) =>
  [...new Set(resources.map((r) => r.group))].filter((g) => g !== "").sort();

/** Answers a discovery path, or undefined when `path` is not one; a discovery path is read
 * only: any other method is refused with 405 MethodNotAllowed, as the API server does. */
export function discovery(
  path: string,
  req: Request,
  resources: KubeResource[],
  now: Date,
): Response | undefined {
  const res = discoveryRead(path, req, resources, now);
  if (res === undefined || req.method === "GET" || req.method === "HEAD") return res;
  throw new StatusError("MethodNotAllowed", `${req.method} is not allowed on ${path}`);
}

function discoveryRead(
  path: string,
  req: Request,
  resources: KubeResource[],
  now: Date,
): Response | undefined {
  const agg = wantsAggregated(req.headers.get("accept"));
  if (path === "/version") return jsonResponse(versionInfo(now));
  if (path === "/api") {
    if (agg) return aggregated([""], resources);
    const host = new URL(req.url).host;
    return jsonResponse({
      kind: "APIVersions",
      versions: ["v1"],
      serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress: host }],
    });
  }
  if (path === "/apis") {
    if (agg) return aggregated(namedGroups(resources), resources);
    return jsonResponse({
      kind: "APIGroupList",
      apiVersion: "v1",
      groups: namedGroups(resources).map((g) => ({
        name: g,
        versions: [{ groupVersion: `${g}/v1`, version: "v1" }],
        preferredVersion: { groupVersion: `${g}/v1`, version: "v1" },
      })),
    });
  }
  if (path === "/api/v1") return jsonResponse(resourceList("", resources));
  const g = /^\/apis\/([^/]+)\/v1$/.exec(path)?.[1];
  if (g !== undefined && namedGroups(resources).includes(g))
    return jsonResponse(resourceList(g, resources));
  if (path === "/openapi/v3") return jsonResponse(openApiIndex(resources));
  const o = /^\/openapi\/v3\/(api\/v1|apis\/[^/]+\/v1)$/.exec(path)?.[1];
  if (o !== undefined) return jsonResponse(openApiDocument(o, resources));
  return undefined;
}

function openApiIndex(resources: KubeResource[]) {
  const hash = buildInfo().commit;
  const paths: Record<string, { serverRelativeURL: string }> = {
    "api/v1": { serverRelativeURL: `/openapi/v3/api/v1?hash=${hash}` },
  };
  for (const g of namedGroups(resources))
    paths[`apis/${g}/v1`] = { serverRelativeURL: `/openapi/v3/apis/${g}/v1?hash=${hash}` };
  return { paths };
}

/**
 * The OpenAPI v3 document of one group-version: each writable resource's item path with its
 * write operations, their GroupVersionKind and the `fieldValidation` query parameter. It names
 * no schemas (kubectl then validates nothing itself and sends fieldValidation=Strict).
 */
function openApiDocument(gvPath: string, resources: KubeResource[]) {
  const group = gvPath === "api/v1" ? "" : (gvPath.split("/")[1] ?? "");
  const paths: Record<string, unknown> = {};
  for (const r of resources.filter((x) => x.group === group)) {
    const gvk = { group, version: "v1", kind: r.kind };
    const params = [
      { name: "fieldValidation", in: "query", schema: { type: "string", uniqueItems: true } },
      { name: "fieldManager", in: "query", schema: { type: "string", uniqueItems: true } },
      { name: "dryRun", in: "query", schema: { type: "string", uniqueItems: true } },
    ];
    const op = (verb: string) => ({
      operationId: `${verb}${r.kind}`,
      "x-kubernetes-action": verb,
      "x-kubernetes-group-version-kind": gvk,
      parameters: params,
      responses: { "200": { description: "OK" } },
    });
    const base = `/${gvPath}${r.namespaced ? "/namespaces/{namespace}" : ""}/${r.name}`;
    const writes = r.verbs.includes("patch");
    paths[`${base}/{name}`] = {
      get: { ...op("get"), parameters: [] },
      ...(writes && { patch: op("patch") }),
      ...(r.verbs.includes("update") && { put: op("put") }),
    };
    if (r.verbs.includes("create")) paths[base] = { post: op("post") };
  }
  return {
    openapi: "3.0.0",
    info: { title: "fleetlet hub", version: `v${KUBE_API.major}.${KUBE_API.minor}.0` },
    paths,
    components: { schemas: {} },
  };
}
