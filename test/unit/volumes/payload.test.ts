import { describe, expect, test } from "bun:test";
import { volumePayload } from "../../../src/agent/volumes/index.ts";
import type { ConfigMap, Secret, Volume } from "../../../src/api/index.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

const b64 = (s: string) => Buffer.from(s).toString("base64");
const cm: ConfigMap = {
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name: "cfg", namespace: "default" },
  data: { a: "1", b: "2" },
  binaryData: { bin: b64("\u0000\u0001") },
};
const secret: Secret = {
  apiVersion: "v1",
  kind: "Secret",
  metadata: { name: "s", namespace: "default" },
  type: "Opaque",
  data: { user: b64("admin"), pass: b64("pw") },
};
const ctx = {
  objects: {
    configMap: (ns: string, name: string) => (ns === "default" && name === "cfg" ? cm : undefined),
    secret: (ns: string, name: string) => (ns === "default" && name === "s" ? secret : undefined),
  },
  allocatable: { cpu: 2000, memory: 2 ** 30, ephemeralStorage: 0 },
  nodeName: "dev1",
};
const pod = makePod({
  name: "web",
  labels: { z: "1", a: "2" },
  containers: [makeContainer({ name: "app", resources: { limits: { memory: "64Mi" } } })],
});

function files(v: Volume): Record<string, string> {
  const r = volumePayload(pod, v, ctx);
  if (!r.ok) throw new Error(r.message);
  return Object.fromEntries(
    [...r.files].map(([p, f]) => [p, `${f.data.toString("latin1")} ${f.mode.toString(8)}`]),
  );
}

function failure(v: Volume): string {
  const r = volumePayload(pod, v, ctx);
  if (r.ok) throw new Error("expected a failure");
  return r.message;
}

describe("volumePayload()", () => {
  test("a configMap volume holds every data and binaryData key with the default mode", () => {
    expect(files({ name: "v", configMap: { name: "cfg", defaultMode: 0o640 } })).toEqual({
      a: "1 640",
      b: "2 640",
      bin: "\u0000\u0001 640",
    });
  });

  test("items choose keys, paths and modes", () => {
    const items = [
      { key: "a", path: "x/a.txt", mode: 0o600 },
      { key: "bin", path: "bin" },
    ];
    expect(files({ name: "v", configMap: { name: "cfg", items, defaultMode: 0o644 } })).toEqual({
      "x/a.txt": "1 600",
      bin: "\u0000\u0001 644",
    });
  });

  test("a missing object or key fails with the kubelet's message, unless optional", () => {
    expect(failure({ name: "v", configMap: { name: "nope" } })).toBe('configmap "nope" not found');
    expect(failure({ name: "v", secret: { secretName: "nope" } })).toBe('secret "nope" not found');
    expect(
      failure({ name: "v", configMap: { name: "cfg", items: [{ key: "zz", path: "p" }] } }),
    ).toBe("configmap references non-existent config key: zz");
    expect(
      failure({ name: "v", secret: { secretName: "s", items: [{ key: "zz", path: "p" }] } }),
    ).toBe("references non-existent secret key: zz");
    expect(files({ name: "v", configMap: { name: "nope", optional: true } })).toEqual({});
    expect(
      files({
        name: "v",
        configMap: { name: "cfg", optional: true, items: [{ key: "zz", path: "p" }] },
      }),
    ).toEqual({});
  });

  test("a secret volume holds the decoded values", () => {
    expect(files({ name: "v", secret: { secretName: "s", defaultMode: 0o400 } })).toEqual({
      user: "admin 400",
      pass: "pw 400",
    });
  });

  test("a downwardAPI volume holds pod fields (labels sorted) and resources", () => {
    const items = [
      { path: "labels", fieldRef: { fieldPath: "metadata.labels" } },
      { path: "./dir//name", fieldRef: { fieldPath: "metadata.name" } },
      {
        path: "mem",
        resourceFieldRef: { containerName: "app", resource: "limits.memory", divisor: "1Mi" },
        mode: 0o600,
      },
    ];
    expect(files({ name: "v", downwardAPI: { items, defaultMode: 0o644 } })).toEqual({
      labels: 'a="2"\nz="1" 644',
      "dir/name": "web 644",
      mem: "64 600",
    });
  });

  test("a projected volume joins its sources under its default mode, and lists every failure", () => {
    const sources = [
      { configMap: { name: "cfg", items: [{ key: "a", path: "cfg/a" }] } },
      { secret: { name: "s", items: [{ key: "user", path: "user", mode: 0o400 }] } },
      { downwardAPI: { items: [{ path: "uid", fieldRef: { fieldPath: "metadata.uid" } }] } },
    ];
    expect(files({ name: "v", projected: { sources, defaultMode: 0o440 } })).toEqual({
      "cfg/a": "1 440",
      user: "admin 400",
      uid: "uid-default-web 440",
    });
    const broken = [{ configMap: { name: "x" } }, { secret: { name: "y" } }];
    expect(failure({ name: "v", projected: { sources: broken } })).toBe(
      '[configmap "x" not found, secret "y" not found]',
    );
  });
});
