// Requests for the hub's Kubernetes API, near-valid and hostile: paths (resources, namespaces,
// names, subresources, bad percent-escapes, odd segments), query strings (selectors, watch,
// resourceVersion, limit, continue, dryRun, fieldValidation...), content types, and bodies (the
// resource's objects mutated, JSON patches, merge patches, text that is not JSON, huge bodies).
import fc from "fast-check";
import { brokenText, type Json, nearValidText } from "./json-mutations.ts";

/** Names the fuzzer never makes: the objects that must outlive every request. */
export const CANARY = "zz-canary-keep";

export interface KubeRequest {
  method: string;
  path: string;
  query: string;
  contentType: string | undefined;
  accept: string | undefined;
  body: string | undefined;
}

const oddName = fc.constantFrom(
  "%zz",
  "%E0%A4%A",
  "%00",
  "a%2Fb",
  "..",
  "__proto__",
  "constructor",
  "Web",
  "a".repeat(300),
  "%F0%9F%98%80",
  "",
);

const name = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom("web-cam-1", "cfg", "s", "ds", "cam-1", "web.1", "x") },
  { weight: 3, arbitrary: oddName },
  { weight: 1, arbitrary: fc.string({ maxLength: 12 }).map(encodeURIComponent) },
);

/** The object of resource `res` that exists (seeded by the property file), mostly. */
const existing: Record<string, string> = {
  pods: "web-cam-1",
  nodes: "cam-1",
  events: "web.1",
  configmaps: "cfg",
  secrets: "s",
  daemonsets: "ds",
  leases: "cam-1",
};
const nameFor = (res: string) =>
  fc.oneof(
    { weight: 3, arbitrary: fc.constant(existing[res] ?? "x") },
    { weight: 2, arbitrary: name },
  );

const namespace = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom("default", "kube-node-lease") },
  { weight: 3, arbitrary: oddName },
);

/** The hub's resources with their API prefix, and some it does not serve. */
const resource = fc.oneof(
  {
    weight: 9,
    arbitrary: fc.constantFrom(
      "/api/v1 pods",
      "/api/v1 nodes",
      "/api/v1 events",
      "/api/v1 configmaps",
      "/api/v1 configmaps",
      "/api/v1 secrets",
      "/api/v1 secrets",
      "/apis/apps/v1 daemonsets",
      "/apis/apps/v1 daemonsets",
      "/apis/apps/v1 controllerrevisions",
      "/apis/coordination.k8s.io/v1 leases",
    ),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "/api/v1 namespaces",
      "/api/v1 services",
      "/apis/x/v1 pods",
      "/api/v1 daemonsets",
      "/apis/apps/v1 ",
    ),
  },
);
const sub = fc.constantFrom("status", "log", "rollout", "history", "rollback", "revoke", "exec");

const path: fc.Arbitrary<[string, string]> = fc.oneof(
  {
    weight: 8,
    arbitrary: resource
      .chain((r) =>
        fc.record({
          r: fc.constant(r),
          ns: fc.option(namespace, { nil: undefined, freq: 3 }),
          n: fc.option(nameFor(r.split(" ")[1] ?? ""), { nil: undefined, freq: 4 }),
          s: fc.oneof(
            { weight: 4, arbitrary: fc.constant(undefined) },
            { weight: 1, arbitrary: sub },
          ),
        }),
      )
      .map(({ r, ns, n, s }) => {
        const [prefix, res] = r.split(" ");
        const nsPart = ns === undefined || res === "nodes" ? [] : ["namespaces", ns];
        const tail = n === undefined ? [] : [n, ...(s !== undefined ? [s] : [])];
        return [[prefix, ...nsPart, res, ...tail].join("/"), res ?? ""] as [string, string];
      }),
  },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom(
        "/",
        "//api//v1//pods",
        "/api/v1/",
        "/api",
        "/apis",
        "/apis/apps",
        "/apis/apps/v1",
        "/openapi/v2",
        "/openapi/v3",
        "/version",
        "/api/v1/join-tokens/x",
        "/api/v1/audit",
        "/api/v1/nodes/cam-1/revoke/x",
        "/api/v1/namespaces/default/pods/web-cam-1/log",
      )
      .map((p) => [p, ""] as [string, string]),
  },
  { weight: 1, arbitrary: fc.webPath().map((p) => [p, ""] as [string, string]) },
);

const selector = fc.oneof(
  fc.constantFrom(
    "app=web",
    "app in (a,b)",
    "!x",
    "a!=b,c",
    "app notin ()",
    "a==b",
    "x in (",
    "=",
    ",,",
    "app=%",
  ),
  fc.constantFrom(
    "metadata.name=web",
    "spec.nodeName=cam-1",
    "status.phase!=Running",
    "metadata.namespace==x",
    "bogus=1",
    "type=Opaque",
    "involvedObject.name=web",
  ),
  fc.string({ maxLength: 30 }),
);

const queryPart = fc.oneof(
  selector.map((s) => `labelSelector=${encodeURIComponent(s)}`),
  selector.map((s) => `fieldSelector=${encodeURIComponent(s)}`),
  fc.constantFrom("watch=true", "watch=1", "watch=false", "watch=yes"),
  fc
    .constantFrom("0", "", "abc", "-1", "1e400", "99999999999999999999", "1")
    .map((v) => `resourceVersion=${v}`),
  fc.constantFrom("1", "0", "-5", "x", "1e9").map((v) => `limit=${v}`),
  fc.constantFrom(
    "continue=abc",
    "continue=",
    "dryRun=All",
    "dryRun=bogus",
    "fieldValidation=Strict",
  ),
  fc.constantFrom(
    "fieldValidation=Ignore",
    "fieldValidation=x",
    "includeObject=Object",
    "includeObject=None",
  ),
  fc.constantFrom(
    "timeoutSeconds=-1",
    "timeoutSeconds=1e12",
    "nodeName=cam-1",
    "namespace=default",
    "node=x",
  ),
  fc.string({ maxLength: 20 }).map(encodeURIComponent),
);

const contentType = fc.constantFrom(
  undefined,
  "application/json",
  "application/yaml",
  "application/merge-patch+json",
  "application/strategic-merge-patch+json",
  "application/json-patch+json",
  "application/apply-patch+yaml",
  "text/plain",
);

const meta = (n: string): Json => ({ name: n, namespace: "default", labels: { app: n } });

/** A valid body of each resource (a node's: the label patch the hub takes). */
export const validObjects: Record<string, Json> = {
  configmaps: {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: meta("cfg"),
    data: { a: "1", "b.txt": "x" },
  },
  secrets: {
    apiVersion: "v1",
    kind: "Secret",
    metadata: meta("s"),
    type: "Opaque",
    data: { p: "cGFzcw==" },
    stringData: { q: "plain" },
  },
  daemonsets: {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: meta("ds"),
    spec: {
      selector: { matchLabels: { app: "ds" } },
      updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 1 } },
      template: {
        metadata: { labels: { app: "ds" } },
        spec: {
          nodeSelector: { "kubernetes.io/arch": "arm64" },
          containers: [
            {
              name: "main",
              image: "busybox",
              env: [{ name: "A", value: "1" }],
              ports: [{ containerPort: 80 }],
              resources: { limits: { memory: "64Mi" } },
            },
          ],
        },
      },
    },
  },
  nodes: { metadata: { labels: { zone: "a", gone: null } } },
  pods: {
    apiVersion: "v1",
    kind: "Pod",
    metadata: meta("web"),
    spec: { containers: [{ name: "c", image: "busybox" }] },
  },
};
const objects = fc.constantFrom(...Object.values(validObjects));

const pointer = fc.constantFrom(
  "/metadata/labels/x",
  "/metadata/name",
  "/data/a",
  "/data",
  "/spec/template/spec/containers/0/image",
  "/spec/template/spec/containers/-",
  "/spec/template/spec/containers/99999999",
  "/spec/template/spec/containers/-1",
  "/__proto__/polluted",
  "/__proto__/polluted",
  "/constructor/prototype/polluted",
  "/data/__proto__",
  "/metadata/__proto__/polluted",
  "",
  "metadata",
  "/a~1b~0c",
);

const jsonPatch = fc
  .array(
    fc.record(
      {
        op: fc.constantFrom("add", "remove", "replace", "test", "move", "copy", "bogus"),
        path: pointer,
        from: pointer,
        value: fc.jsonValue({ maxDepth: 2 }),
      },
      { requiredKeys: ["op", "path"] },
    ),
    { maxLength: 4 },
  )
  .map((ops) => JSON.stringify(ops));

const body = (res: string) =>
  fc.oneof(
    { weight: 6, arbitrary: nearValidText(fc.constant(validObjects[res] ?? null)) },
    { weight: 2, arbitrary: nearValidText(objects) },
    { weight: 2, arbitrary: jsonPatch },
    { weight: 2, arbitrary: brokenText(objects) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        JSON.stringify({ metadata: { name: "cfg" }, data: { big: "x".repeat(4 * 1024 * 1024) } }),
        `${"[".repeat(20_000)}${"]".repeat(20_000)}`,
        JSON.stringify({ metadata: { name: "cfg", labels: { "a/b/c": "x" } } }),
        "{}",
        "null",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  a: *x\n",
        "a: &a [*a]",
      ),
    },
  );

const patchType = fc.constantFrom(
  "application/merge-patch+json",
  "application/strategic-merge-patch+json",
  "application/json-patch+json",
  "application/json-patch+json",
  "application/apply-patch+yaml",
);

/** The body and its content type: a PATCH mostly of a patch type, a JSON patch's body mostly
 * operations; the rest anything. */
const bodyOf = (method: string, res: string) =>
  fc
    .tuple(
      method === "PATCH" ? fc.oneof({ weight: 4, arbitrary: patchType }, contentType) : contentType,
    )
    .chain(([type]) =>
      fc.tuple(
        fc.constant(type),
        fc.option(
          type?.startsWith("application/json-patch")
            ? fc.oneof({ weight: 3, arbitrary: jsonPatch }, body(res))
            : body(res),
          {
            nil: undefined,
            freq: 8,
          },
        ),
      ),
    );

export const kubeRequest: fc.Arbitrary<KubeRequest> = fc
  .tuple(
    path,
    fc.constantFrom(...["GET", "GET", "POST", "PUT", "PATCH", "PATCH", "PATCH", "DELETE"], "HEAD"),
  )
  .chain(([[p, res], method]) =>
    fc.record({
      method: fc.constant(method),
      path: fc.constant(p),
      query: fc.array(queryPart, { maxLength: 3 }).map((q) => q.join("&")),
      typed: bodyOf(method, res),
      accept: fc.constantFrom(
        undefined,
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        "*/*",
      ),
    }),
  )
  .map(({ typed: [contentType, body], ...r }) => ({ ...r, contentType, body }));
