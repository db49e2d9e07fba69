import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type ConfigObject,
  createFileSource,
  createObjectStore,
  type ManifestProblem,
  type ObjectConflict,
  objectsUsedBy,
  parseManifestFile,
} from "../../../src/agent/sources/index.ts";
import type { ConfigMap, Pod } from "../../../src/api/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

const ctx = { path: "/m/app.yaml", nodeName: "dev1" };
const cmYaml = (name: string, value = "v", extra = "") =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\n${extra}data:\n  key: ${value}\n`;
const podYaml = (name: string, extra = "") =>
  `apiVersion: v1\nkind: Pod\nmetadata:\n  name: ${name}\nspec:\n${extra}  containers:\n    - name: app\n      image: x:1\n`;

function parsed(text: string) {
  const r = parseManifestFile(text, ctx);
  if (!r.ok) throw new Error(r.message);
  return r;
}

describe("parseManifestFile() with ConfigMaps and Secrets", () => {
  test("takes ConfigMaps and Secrets beside pods, in any order", () => {
    const r = parsed(
      `${podYaml("web")}---\n${cmYaml("cfg")}---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  namespace: edge\nstringData:\n  k: v\n`,
    );
    expect(r.pods.map((p) => p.metadata.name)).toEqual(["web-dev1"]);
    expect(r.objects.map((o) => `${o.kind} ${o.metadata.namespace}/${o.metadata.name}`)).toEqual([
      "ConfigMap default/cfg",
      "Secret edge/s",
    ]);
    // Objects keep their names: only pods get the node's suffix.
    expect(r.objects[1]).toMatchObject({ type: "Opaque", data: { k: "dg==" } });
  });

  test("reads modes written with a leading zero as octal, as Kubernetes does", () => {
    const spec =
      "  volumes:\n    - name: s\n      secret: { secretName: s, defaultMode: 0400, items: [{ key: k, path: p, mode: 0o600 }] }\n";
    const [pod] = parsed(podYaml("web", spec)).pods;
    expect(pod?.spec.volumes?.[0]?.secret).toMatchObject({
      defaultMode: 0o400,
      items: [{ mode: 0o600 }],
    });
  });

  test("names the file, document, object and field of an invalid object", () => {
    const r = parseManifestFile(
      `${podYaml("web")}---\n${cmYaml("cfg", "v", "binaryData:\n  key: Zm9v\n")}`,
      ctx,
    );
    expect(r).toEqual({
      ok: false,
      message:
        'manifest /m/app.yaml (document 2): configmap "cfg": data[key]: Invalid value: "key": duplicate of key present in binaryData',
    });
  });

  test("refuses an object defined twice in a file, and a kind it does not know", () => {
    expect(parseManifestFile(`${cmYaml("a")}---\n${cmYaml("a")}`, ctx)).toEqual({
      ok: false,
      message:
        'manifest /m/app.yaml (document 2): configmap "default/a" is also defined in document 1',
    });
    expect(
      parseManifestFile("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n", ctx),
    ).toEqual({
      ok: false,
      message:
        'manifest /m/app.yaml: kind: Unsupported value: "Deployment": supported values: "Pod", "ConfigMap", "Secret"',
    });
  });
});

describe("file source objects", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleetlet-objects-"));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  function harness() {
    const calls: string[] = [];
    const objects: ConfigObject[][] = [];
    const errors: ManifestProblem[] = [];
    const source = createFileSource({
      path: dir,
      nodeName: "dev1",
      checkFrequencyMs: 20_000,
      clock: new FakeClock(0),
      log: nullLogger,
      onSnapshot: (pods) => calls.push(`pods ${pods.length}`),
      onObjects: (list) => {
        calls.push(`objects ${list.length}`);
        objects.push(list);
      },
      onError: (p) => errors.push(p),
    });
    const values = () => (objects.at(-1) ?? []).map((o) => (o as ConfigMap).data?.key);
    return { source, calls, objects, errors, values };
  }

  test("hands the objects on before the pods, so that a pod never starts before its ConfigMap", async () => {
    const h = harness();
    await writeFile(join(dir, "a.yaml"), `${cmYaml("cfg")}---\n${podYaml("web")}`);
    await h.source.relist();
    expect(h.calls).toEqual(["objects 1", "pods 1"]);
  });

  test("keeps the last valid version of an object whose edit is invalid, naming file and field", async () => {
    const h = harness();
    await writeFile(join(dir, "cfg.yaml"), cmYaml("cfg", "one"));
    await h.source.relist();
    await writeFile(join(dir, "cfg.yaml"), cmYaml("cfg", "two").replace("  key:", "  bad key:"));
    await h.source.relist();
    expect(h.values()).toEqual(["one"]);
    expect(h.errors.at(-1)?.message).toBe(
      `manifest ${join(dir, "cfg.yaml")}: configmap "cfg": data[bad key]: Invalid value: "bad key": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+'); its last valid version keeps running`,
    );
    await writeFile(join(dir, "cfg.yaml"), cmYaml("cfg", "three"));
    await h.source.relist();
    expect(h.values()).toEqual(["three"]);
  });

  test("refuses an object of the same name in a later file", async () => {
    const h = harness();
    await writeFile(join(dir, "a.yaml"), cmYaml("cfg", "a"));
    await writeFile(join(dir, "b.yaml"), cmYaml("cfg", "b"));
    await h.source.relist();
    expect(h.values()).toEqual(["a"]);
    expect(h.errors.map((e) => e.message)).toEqual([
      `manifest ${join(dir, "b.yaml")}: configmap "default/cfg" is already defined in manifest ${join(dir, "a.yaml")}`,
    ]);
  });

  test("refuses a change of an immutable object until it is deleted, then takes a new one", async () => {
    const h = harness();
    await writeFile(join(dir, "cfg.yaml"), cmYaml("cfg", "one", "immutable: true\n"));
    await h.source.relist();
    await writeFile(join(dir, "cfg.yaml"), cmYaml("cfg", "two", "immutable: true\n"));
    await h.source.relist();
    expect(h.values()).toEqual(["one"]);
    expect(h.errors.at(-1)?.message).toContain(
      'configmap "default/cfg": data: Forbidden: field is immutable when `immutable` is set (delete it first to replace it)',
    );
    await rm(join(dir, "cfg.yaml"));
    await h.source.relist();
    expect(h.values()).toEqual([]);
    await writeFile(join(dir, "cfg.yaml"), cmYaml("cfg", "two", "immutable: true\n"));
    await h.source.relist();
    expect(h.values()).toEqual(["two"]);
  });
});

function cm(name: string, value: string, namespace = "default"): ConfigMap {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name, namespace },
    data: { key: value },
  };
}

describe("object store", () => {
  function harness() {
    const conflicts: ObjectConflict[] = [];
    const changes: string[][] = [];
    const store = createObjectStore({
      sources: ["file", "api"],
      onError: (c) => conflicts.push(c),
    });
    store.subscribe((keys) => changes.push([...keys].sort()));
    return { store, conflicts, changes };
  }

  test("holds each source's set and tells which keys changed", () => {
    const h = harness();
    h.store.set("file", [cm("a", "1"), cm("b", "1")]);
    h.store.set("file", [cm("a", "1"), cm("b", "2")]);
    h.store.set("file", [cm("a", "1")]);
    h.store.set("file", [cm("a", "1")]);
    expect(h.changes).toEqual([
      ["ConfigMap/default/a", "ConfigMap/default/b"],
      ["ConfigMap/default/b"],
      ["ConfigMap/default/b"],
    ]);
    expect(h.store.configMap("default", "a")?.data).toEqual({ key: "1" });
    expect(h.store.configMap("default", "b")).toBeUndefined();
    expect(h.store.secret("default", "a")).toBeUndefined();
    expect(Object.isFrozen(h.store.configMap("default", "a"))).toBe(true);
  });

  test("gives a key to the source that had it first, and hands it over without a gap", () => {
    const h = harness();
    h.store.set("file", [cm("a", "file")]);
    h.store.set("api", [cm("a", "api"), cm("b", "api")]);
    h.store.set("api", [cm("a", "api"), cm("b", "api")]);
    expect(h.store.configMap("default", "a")?.data?.key).toBe("file");
    expect(h.conflicts).toEqual([
      {
        source: "api",
        kind: "ConfigMap",
        namespace: "default",
        name: "a",
        message: 'configmap "default/a" from source "api" is ignored: source "file" already has it',
      },
    ]);
    h.store.set("file", []);
    expect(h.store.configMap("default", "a")?.data?.key).toBe("api");
    expect(h.changes.at(-1)).toEqual(["ConfigMap/default/a"]);
  });

  test("refuses a source it does not know", () => {
    expect(() => harness().store.set("hub" as never, [])).toThrow('unknown source "hub"');
  });
});

describe("objectsUsedBy()", () => {
  test("lists the ConfigMaps and Secrets of volumes, projections, env, envFrom and pull secrets", () => {
    const pod: Pod = makePod({
      namespace: "edge",
      containers: [
        makeContainer({
          env: [
            { name: "A", valueFrom: { configMapKeyRef: { name: "env-cm", key: "k" } } },
            { name: "B", valueFrom: { secretKeyRef: { name: "env-s", key: "k" } } },
          ],
          envFrom: [{ configMapRef: { name: "from-cm" } }, { secretRef: { name: "from-s" } }],
        }),
      ],
      spec: {
        containers: [],
        imagePullSecrets: [{ name: "pull" }],
        volumes: [
          { name: "a", configMap: { name: "vol-cm" } },
          { name: "b", secret: { secretName: "vol-s" } },
          {
            name: "c",
            projected: { sources: [{ configMap: { name: "p-cm" } }, { secret: { name: "p-s" } }] },
          },
          { name: "d", emptyDir: {} },
        ],
      },
    });
    expect([...objectsUsedBy(pod)].sort()).toEqual([
      "ConfigMap/edge/env-cm",
      "ConfigMap/edge/from-cm",
      "ConfigMap/edge/p-cm",
      "ConfigMap/edge/vol-cm",
      "Secret/edge/env-s",
      "Secret/edge/from-s",
      "Secret/edge/p-s",
      "Secret/edge/pull",
      "Secret/edge/vol-s",
    ]);
  });
});
