// The hub's Kubernetes API pieces: paths, patches, resource versions, discovery.
import { describe, expect, test } from "bun:test";
import { ChangeLog } from "../../../src/hub/kube/changes.ts";
import { discovery, wantsAggregated } from "../../../src/hub/kube/discovery.ts";
import { parseKubePath } from "../../../src/hub/kube/index.ts";
import {
  jsonPatch,
  mergePatch,
  strategicMergePatch,
  unknownFields,
} from "../../../src/hub/kube/patch.ts";
import { wantsTable } from "../../../src/hub/kube/reads.ts";
import { hubResources } from "../../../src/hub/kube/resources.ts";

describe("parseKubePath()", () => {
  test.each([
    ["/api/v1/pods", { group: "", resource: "pods" }],
    ["/api/v1/nodes/cam-1", { group: "", resource: "nodes", name: "cam-1" }],
    [
      "/api/v1/namespaces/default/pods/web/log",
      { group: "", namespace: "default", resource: "pods", name: "web", sub: "log" },
    ],
    [
      "/apis/apps/v1/namespaces/x/daemonsets",
      { group: "apps", namespace: "x", resource: "daemonsets" },
    ],
  ])("%s", (path, want) => {
    expect(parseKubePath(path)).toEqual(want);
  });

  test("is undefined off the API's paths", () => {
    expect(parseKubePath("/dashboard")).toBeUndefined();
    expect(parseKubePath("/api/v1/namespaces/a/pods/b/log/extra")).toBeUndefined();
  });
});

describe("patches", () => {
  const ds = {
    spec: {
      template: {
        spec: {
          containers: [
            {
              name: "a",
              image: "x:1",
              env: [
                { name: "K", value: "1" },
                { name: "L", value: "2" },
              ],
            },
            { name: "b", image: "y:1" },
          ],
        },
      },
    },
  };

  test("mergePatch() merges objects, removes nulls and replaces lists", () => {
    expect(
      mergePatch({ a: 1, b: { c: 2, d: 3 }, l: [1] }, { b: { c: null, e: 4 }, l: [2] }),
    ).toEqual({ a: 1, b: { d: 3, e: 4 }, l: [2] });
  });

  test("strategicMergePatch() merges lists of containers and env by name", () => {
    const out = strategicMergePatch(
      ds as never,
      {
        spec: {
          template: {
            spec: {
              containers: [
                { name: "a", env: [{ name: "K", value: "9" }] },
                { name: "c", image: "z" },
              ],
            },
          },
        },
      } as never,
    ) as typeof ds;
    const cs = out.spec.template.spec.containers;
    expect(cs.map((c) => c.name)).toEqual(["a", "b", "c"]);
    expect(cs[0]).toEqual({
      name: "a",
      image: "x:1",
      env: [
        { name: "K", value: "9" },
        { name: "L", value: "2" },
      ],
    });
  });

  test("strategicMergePatch() follows $patch: delete, $setElementOrder and $deleteFromPrimitiveList", () => {
    const out = strategicMergePatch(
      { containers: [{ name: "a" }, { name: "b" }, { name: "c" }], args: ["x", "y", "z"] },
      {
        containers: [{ name: "b", $patch: "delete" }],
        "$setElementOrder/containers": [{ name: "c" }, { name: "a" }],
        "$deleteFromPrimitiveList/args": ["y"],
      },
    );
    expect(out).toEqual({ containers: [{ name: "c" }, { name: "a" }], args: ["x", "z"] });
  });

  test("jsonPatch() adds, replaces, removes and tests", () => {
    const out = jsonPatch({ a: [1, 2], b: { c: 1 } }, [
      { op: "add", path: "/a/1", value: 9 },
      { op: "replace", path: "/b/c", value: 2 },
      { op: "remove", path: "/a/0" },
      { op: "test", path: "/b/c", value: 2 },
    ]);
    expect(out).toEqual({ a: [9, 2], b: { c: 2 } });
    expect(() => jsonPatch({}, [{ op: "replace", path: "/x", value: 1 }])).toThrow(
      "does not exist",
    );
  });

  test("unknownFields() names what decoding dropped, outside metadata and status", () => {
    const input = { metadata: { zzz: 1 }, spec: { a: 1, b: [{ c: 1, d: 2 }] }, status: { q: 1 } };
    const decoded = { metadata: {}, spec: { a: 1, b: [{ c: 1 }] } };
    expect(unknownFields(input, decoded)).toEqual(["spec.b[0].d"]);
  });
});

describe("ChangeLog", () => {
  const pod = (name: string) => ({ metadata: { name, namespace: "default", uid: `u-${name}` } });

  test("stamps objects with the version of their last change, and replays changes since a version", () => {
    const log = new ChangeLog(1000);
    expect(log.withVersion("pods", pod("a")).metadata.resourceVersion).toBe("1000");
    log.record("pods", "ADDED", pod("a"));
    const after = log.current();
    log.record("pods", "MODIFIED", pod("a"));
    log.record("pods", "DELETED", pod("b"));
    expect(log.withVersion("pods", pod("a")).metadata.resourceVersion).toBe("1002");
    const since = log.since(after);
    expect(since !== "gone" && since.map((c) => [c.type, c.object.metadata.name])).toEqual([
      ["MODIFIED", "a"],
      ["DELETED", "b"],
    ]);
  });

  test("answers gone for a version before its start or older than its ring", () => {
    const log = new ChangeLog(1000, 2);
    for (let i = 0; i < 5; i++) log.record("pods", "MODIFIED", pod("a"));
    expect(log.since(999)).toBe("gone");
    expect(log.since(1001)).toBe("gone");
    expect(log.since(1003)).not.toBe("gone");
  });
});

describe("discovery", () => {
  const resources = hubResources({
    fleet: {
      ...{ nodes: new Map(), view: () => undefined, allPods: () => [], allEvents: () => [] },
      lastSeen: () => undefined,
    },
    deployer: {
      list: () => [],
      get: () => undefined,
      objects: { list: () => [], get: () => undefined },
      catalog: { controllerRevisions: () => [] },
    } as never,
  });
  const req = (path: string, accept = "application/json") =>
    new Request(`https://hub.test${path}`, { headers: { accept } });
  const agg =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";

  test("reads what kubectl's Accept headers ask for", () => {
    expect(wantsAggregated(agg)).toBe(true);
    expect(wantsAggregated("application/json")).toBe(false);
    expect(wantsTable("application/json;as=Table;v=v1;g=meta.k8s.io,application/json")).toBe(true);
  });

  test("serves aggregated discovery of the core group with pods and their subresources", async () => {
    const res = discovery("/api", req("/api", agg), resources, new Date(0));
    expect(res?.headers.get("content-type")).toContain("as=APIGroupDiscoveryList");
    const body = (await res?.json()) as {
      items: {
        versions: { resources: { resource: string; subresources?: { subresource: string }[] }[] }[];
      }[];
    };
    const pods = body.items[0]?.versions[0]?.resources.find((r) => r.resource === "pods");
    expect(pods?.subresources?.map((s) => s.subresource)).toEqual([
      "log",
      "exec",
      "attach",
      "portforward",
    ]);
  });

  test.each(["/version", "/api", "/apis", "/api/v1", "/apis/apps/v1", "/openapi/v3"])(
    "refuses a write to %s with 405 MethodNotAllowed",
    (path) => {
      const write = new Request(`https://hub.test${path}`, { method: "POST", body: "{}" });
      expect(() => discovery(path, write, resources, new Date(0))).toThrow(
        expect.objectContaining({ reason: "MethodNotAllowed" }),
      );
      expect(discovery(path, req(path), resources, new Date(0))?.status).toBe(200);
    },
  );

  test("serves the legacy group list, resource lists and an OpenAPI v3 document with fieldValidation", async () => {
    const groups = (await discovery("/apis", req("/apis"), resources, new Date(0))?.json()) as {
      groups: { name: string }[];
    };
    expect(groups.groups.map((g) => g.name)).toEqual(["apps", "coordination.k8s.io"]);
    const list = (await discovery(
      "/apis/apps/v1",
      req("/apis/apps/v1"),
      resources,
      new Date(0),
    )?.json()) as {
      resources: { name: string }[];
    };
    expect(list.resources.map((r) => r.name)).toEqual(["daemonsets", "controllerrevisions"]);
    const doc = (await discovery(
      "/openapi/v3/apis/apps/v1",
      req("/x"),
      resources,
      new Date(0),
    )?.json()) as {
      paths: Record<string, { patch?: { parameters: { name: string }[] } }>;
    };
    const patch = doc.paths["/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}"]?.patch;
    expect(patch?.parameters.map((p) => p.name)).toContain("fieldValidation");
  });
});
