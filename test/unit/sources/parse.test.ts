import { describe, expect, test } from "bun:test";
import { parseManifestFile } from "../../../src/agent/sources/index.ts";
import type { Pod } from "../../../src/api/index.ts";
import { sleeperManifest } from "../../lib/manifests.ts";

const ctx = { path: "/etc/fleetlet/manifests/web.yaml", nodeName: "dev1" };

function podYaml(name = "web", image = "nginx:1.27", extra = ""): string {
  return `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
${extra}spec:
  containers:
    - name: app
      image: ${image}
`;
}

function pods(text: string, c = ctx): Pod[] {
  const result = parseManifestFile(text, c);
  if (!result.ok) throw new Error(result.message);
  return result.pods;
}

function error(text: string): string {
  const result = parseManifestFile(text, ctx);
  if (result.ok) throw new Error("expected an error");
  return result.message;
}

describe("parseManifestFile()", () => {
  test("gives a static pod the node's name suffix, default namespace, node name and annotations", () => {
    const [pod] = pods(podYaml());
    expect(pod?.metadata.name).toBe("web-dev1");
    expect(pod?.metadata.namespace).toBe("default");
    expect(pod?.spec.nodeName).toBe("dev1");
    expect(pod?.metadata.uid).toMatch(/^[0-9a-f]{32}$/);
    expect(pod?.metadata.annotations).toEqual({
      "kubernetes.io/config.hash": pod?.metadata.uid ?? "",
      "kubernetes.io/config.source": "file",
    });
    expect(pod?.spec.restartPolicy).toBe("Always");
    expect(pod?.spec.containers[0]?.imagePullPolicy).toBe("IfNotPresent");
  });

  test("reads JSON as well as YAML, with the same uid for the same pod", () => {
    const json = JSON.stringify({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "web" },
      spec: { containers: [{ name: "app", image: "nginx:1.27" }] },
    });
    expect(pods(json)[0]?.metadata.uid).toBe(pods(podYaml())[0]?.metadata.uid ?? "");
  });

  test("keeps the uid when only formatting or comments change", () => {
    const a = pods(podYaml())[0]?.metadata.uid;
    const b = pods(`# comment\n${podYaml().replace("  name: web", "  name:   web  ")}`)[0]?.metadata
      .uid;
    expect(b).toBe(a ?? "");
  });

  test("changes the uid with the content, the node and the path", () => {
    const base = pods(podYaml())[0]?.metadata.uid;
    expect(pods(podYaml("web", "nginx:1.28"))[0]?.metadata.uid).not.toBe(base ?? "");
    expect(pods(podYaml(), { ...ctx, nodeName: "dev2" })[0]?.metadata.uid).not.toBe(base ?? "");
    expect(pods(podYaml(), { ...ctx, path: "/other.yaml" })[0]?.metadata.uid).not.toBe(base ?? "");
  });

  test("keeps a uid written in the manifest, as the kubelet does", () => {
    const [pod] = pods(podYaml("web", "nginx:1.27", "  uid: fixed-uid\n"));
    expect(pod?.metadata.uid).toBe("fixed-uid");
    expect(pod?.metadata.annotations?.["kubernetes.io/config.hash"]).toBe("fixed-uid");
  });

  test("reads several pods from one file and skips empty documents", () => {
    const text = `---\n${podYaml("a")}---\n# empty\n---\n${podYaml("b")}`;
    expect(pods(text).map((p) => p.metadata.name)).toEqual(["a-dev1", "b-dev1"]);
  });

  test("reads an empty file as no pods", () => {
    expect(pods("")).toEqual([]);
    expect(pods("# only a comment\n")).toEqual([]);
  });

  const cases: [string, string, string][] = [
    ["invalid YAML", "apiVersion: v1\nkind: [Pod\n", `manifest ${ctx.path}: invalid YAML: `],
    ["a list", "- a\n", `manifest ${ctx.path}: expected a Pod object, got a list`],
    [
      "a wrong type",
      podYaml().replace("image: nginx:1.27", "image: 5"),
      `manifest ${ctx.path}: pod "web": spec.containers[0].image: Invalid value: 5: must be of type string`,
    ],
    [
      "no containers",
      "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: []}\n",
      `manifest ${ctx.path}: pod "web": spec.containers: Required value`,
    ],
    [
      "an invalid name",
      podYaml("Web_1"),
      `manifest ${ctx.path}: pod "Web_1": metadata.name: Invalid value: "Web_1"`,
    ],
    [
      "another kind",
      podYaml().replace("kind: Pod", "kind: Deployment"),
      'kind: Unsupported value: "Deployment"',
    ],
    [
      "a name too long once the node name is appended",
      podYaml("a".repeat(250)),
      'metadata.name: Invalid value: "aaa',
    ],
  ];
  for (const [what, text, expected] of cases) {
    test(`rejects ${what}, naming the file and the field`, () => {
      expect(error(text)).toContain(expected);
    });
  }

  test("rejects the whole file when one document is invalid, naming the document", () => {
    const message = error(`${podYaml("a")}---\n${podYaml("b").replace("image: nginx:1.27", "")}`);
    expect(message).toContain(`manifest ${ctx.path} (document 2): pod "b"`);
    expect(message).toContain("spec.containers[0].image: Required value");
  });

  test("rejects two pods of the same name in one file", () => {
    expect(error(`${podYaml("a")}---\n${podYaml("a", "busybox:1")}`)).toBe(
      `manifest ${ctx.path} (document 2): pod "default/a-dev1" is also defined in document 1`,
    );
  });

  test("refuses a key given twice, naming the line", () => {
    const result = parseManifestFile(`${sleeperManifest("s", "busybox:1.36")}kind: Pod\n`, {
      path: "/m/s.yaml",
      nodeName: "dev1",
    });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.message).toMatch(/invalid YAML: Map keys must be unique at line/);
  });
});
