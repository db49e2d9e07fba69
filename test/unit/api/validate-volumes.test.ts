import { describe, expect, test } from "bun:test";
import { applyPodDefaults, validatePod } from "../../../src/api/index.ts";
import { makeManifest, manifestErrors, manifestWithContainer } from "../../lib/builders.ts";

const errorsOf = manifestErrors;
const withContainer = manifestWithContainer;

describe("validatePod() of volumes and env sources", () => {
  test("accepts every volume type and env source, and defaults volume file modes to 0644", () => {
    const manifest = withContainer(
      {
        env: [
          { name: "A", valueFrom: { configMapKeyRef: { name: "c", key: "k", optional: true } } },
          { name: "B", valueFrom: { secretKeyRef: { name: "s", key: "k" } } },
          {
            name: "C",
            valueFrom: { resourceFieldRef: { resource: "limits.memory", divisor: "1Mi" } },
          },
          { name: "D", valueFrom: { fieldRef: { fieldPath: "metadata.labels['app']" } } },
        ],
        envFrom: [
          { prefix: "P_", configMapRef: { name: "c" } },
          { secretRef: { name: "s", optional: true } },
        ],
        volumeMounts: [
          { name: "c", mountPath: "/c" },
          { name: "s", mountPath: "/s", subPath: "key" },
          { name: "d", mountPath: "/d", subPathExpr: "$(A)" },
          { name: "p", mountPath: "/p" },
        ],
      },
      {
        imagePullSecrets: [{ name: "regcred" }],
        volumes: [
          {
            name: "c",
            configMap: { name: "c", items: [{ key: "k", path: "dir/k", mode: 0o600 }] },
          },
          { name: "s", secret: { secretName: "s", defaultMode: 0o400, optional: true } },
          {
            name: "d",
            downwardAPI: {
              items: [
                { path: "labels", fieldRef: { fieldPath: "metadata.labels" } },
                {
                  path: "cpu",
                  resourceFieldRef: {
                    containerName: "app",
                    resource: "requests.cpu",
                    divisor: "1m",
                  },
                },
              ],
            },
          },
          {
            name: "p",
            projected: {
              sources: [
                { configMap: { name: "c" } },
                { secret: { name: "s", items: [{ key: "k", path: "s/k" }] } },
                {
                  downwardAPI: {
                    items: [{ path: "name", fieldRef: { fieldPath: "metadata.name" } }],
                  },
                },
              ],
            },
          },
        ],
      },
    );
    expect(errorsOf(manifest)).toEqual([]);
    const r = validatePod(manifest);
    if (!r.ok) throw new Error("invalid");
    const volumes = applyPodDefaults(r.pod).spec.volumes ?? [];
    expect(
      volumes.map(
        (v) =>
          v.configMap?.defaultMode ??
          v.secret?.defaultMode ??
          v.downwardAPI?.defaultMode ??
          v.projected?.defaultMode,
      ),
    ).toEqual([0o644, 0o400, 0o644, 0o644]);
  });

  const cases: [string, unknown, string][] = [
    [
      "a configMap volume without a name",
      makeManifest({ volumes: [{ name: "cfg", configMap: {} }] }),
      "spec.volumes[0].configMap.name: Required value",
    ],
    [
      "a secret volume without a secretName",
      makeManifest({ volumes: [{ name: "s", secret: { defaultMode: 0o400 } }] }),
      "spec.volumes[0].secret.secretName: Required value",
    ],
    [
      "two sources in one volume",
      makeManifest({ volumes: [{ name: "v", emptyDir: {}, secret: { secretName: "s" } }] }),
      "spec.volumes[0].secret: Forbidden: may not specify more than 1 volume type",
    ],
    [
      "an item path with '..'",
      makeManifest({
        volumes: [
          { name: "c", configMap: { name: "c", items: [{ key: "k", path: "a/../../b" }] } },
        ],
      }),
      `spec.volumes[0].configMap.items[0].path: Invalid value: "a/../../b": must not contain '..'`,
    ],
    [
      "an item path starting with '..'",
      makeManifest({
        volumes: [{ name: "c", configMap: { name: "c", items: [{ key: "k", path: "..data" }] } }],
      }),
      `spec.volumes[0].configMap.items[0].path: Invalid value: "..data": must not start with '..'`,
    ],
    [
      "an absolute item path",
      makeManifest({
        volumes: [
          { name: "s", secret: { secretName: "s", items: [{ key: "k", path: "/etc/x" }] } },
        ],
      }),
      'spec.volumes[0].secret.items[0].path: Invalid value: "/etc/x": must be a relative path',
    ],
    [
      "a file mode above 0777",
      makeManifest({ volumes: [{ name: "s", secret: { secretName: "s", defaultMode: 0o1000 } }] }),
      "spec.volumes[0].secret.defaultMode: Invalid value: 512: must be a number between 0 and 0777 (octal), both inclusive",
    ],
    [
      "an item key missing",
      makeManifest({
        volumes: [{ name: "c", configMap: { name: "c", items: [{ key: "", path: "p" }] } }],
      }),
      "spec.volumes[0].configMap.items[0].key: Required value",
    ],
    [
      "a downwardAPI file of a pod field no volume may hold",
      makeManifest({
        volumes: [
          {
            name: "d",
            downwardAPI: { items: [{ path: "ip", fieldRef: { fieldPath: "status.podIP" } }] },
          },
        ],
      }),
      'spec.volumes[0].downwardAPI.items[0].fieldRef.fieldPath: Unsupported value: "status.podIP": supported values: "metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid"',
    ],
    [
      "a downwardAPI resourceFieldRef without a container",
      makeManifest({
        volumes: [
          {
            name: "d",
            downwardAPI: {
              items: [{ path: "m", resourceFieldRef: { resource: "limits.memory" } }],
            },
          },
        ],
      }),
      "spec.volumes[0].downwardAPI.items[0].resourceFieldRef.containerName: Required value",
    ],
    [
      "a downwardAPI file with neither fieldRef nor resourceFieldRef",
      makeManifest({ volumes: [{ name: "d", downwardAPI: { items: [{ path: "m" }] } }] }),
      "spec.volumes[0].downwardAPI.items[0]: Required value: one of fieldRef and resourceFieldRef is required",
    ],
    [
      "a projected serviceAccountToken",
      makeManifest({
        volumes: [
          { name: "p", projected: { sources: [{ serviceAccountToken: { path: "token" } }] } },
        ],
      }),
      "spec.volumes[0].projected.sources[0].serviceAccountToken: Forbidden: is not supported: fleetlet has no API server to issue service account tokens",
    ],
    [
      "a projected source with two kinds",
      makeManifest({
        volumes: [
          {
            name: "p",
            projected: { sources: [{ configMap: { name: "a" }, secret: { name: "b" } }] },
          },
        ],
      }),
      "spec.volumes[0].projected.sources[0]: Forbidden: may not specify more than 1 volume type per source",
    ],
    [
      "two projected sources writing one path",
      makeManifest({
        volumes: [
          {
            name: "p",
            projected: {
              sources: [
                { configMap: { name: "a", items: [{ key: "k", path: "x" }] } },
                { secret: { name: "b", items: [{ key: "k", path: "x" }] } },
              ],
            },
          },
        ],
      }),
      'spec.volumes[0].projected: Invalid value: "b": conflicting duplicate paths',
    ],
    [
      "a configMapKeyRef key that is no config key",
      withContainer({
        env: [{ name: "X", valueFrom: { configMapKeyRef: { name: "c", key: "a b" } } }],
      }),
      'spec.containers[0].env[0].valueFrom.configMapKeyRef.key: Invalid value: "a b": a valid config key must consist of alphanumeric characters',
    ],
    [
      "a secretKeyRef without a name",
      withContainer({ env: [{ name: "X", valueFrom: { secretKeyRef: { key: "k" } } }] }),
      'spec.containers[0].env[0].valueFrom.secretKeyRef.name: Invalid value: "": a lowercase RFC 1123 subdomain',
    ],
    [
      "a value beside a valueFrom",
      withContainer({
        env: [{ name: "X", value: "v", valueFrom: { configMapKeyRef: { name: "c", key: "k" } } }],
      }),
      'spec.containers[0].env[0].valueFrom: Invalid value: "": may not be specified when `value` is not empty',
    ],
    [
      "two sources in one valueFrom",
      withContainer({
        env: [
          {
            name: "X",
            valueFrom: {
              configMapKeyRef: { name: "c", key: "k" },
              secretKeyRef: { name: "s", key: "k" },
            },
          },
        ],
      }),
      'spec.containers[0].env[0].valueFrom: Invalid value: "": may not have more than one field specified at a time',
    ],
    [
      "a resourceFieldRef cpu divisor in bytes",
      withContainer({
        env: [
          {
            name: "X",
            valueFrom: { resourceFieldRef: { resource: "limits.cpu", divisor: "1Mi" } },
          },
        ],
      }),
      'spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor: Invalid value: "limits.cpu": only divisor\'s values 1m and 1 are supported with the cpu resource',
    ],
    [
      "an envFrom with no source",
      withContainer({ envFrom: [{ prefix: "P_" }] }),
      'spec.containers[0].envFrom: Invalid value: "": must specify one of: `configMapRef` or `secretRef`',
    ],
    [
      "an envFrom prefix that is no variable name",
      withContainer({ envFrom: [{ prefix: "1X", configMapRef: { name: "c" } }] }),
      'spec.containers[0].envFrom[0].prefix: Invalid value: "1X": a valid environment variable name',
    ],
    [
      "an envFrom configMapRef without a name",
      withContainer({ envFrom: [{ configMapRef: {} }] }),
      "spec.containers[0].envFrom[0].configMapRef.name: Required value",
    ],
    [
      "subPath and subPathExpr together",
      withContainer(
        { volumeMounts: [{ name: "w", mountPath: "/w", subPath: "a", subPathExpr: "$(B)" }] },
        { volumes: [{ name: "w", emptyDir: {} }] },
      ),
      'spec.containers[0].volumeMounts[0].subPathExpr: Invalid value: "$(B)": subPathExpr and subPath are mutually exclusive',
    ],
    [
      "an absolute subPathExpr",
      withContainer(
        { volumeMounts: [{ name: "w", mountPath: "/w", subPathExpr: "/$(B)" }] },
        { volumes: [{ name: "w", emptyDir: {} }] },
      ),
      'spec.containers[0].volumeMounts[0].subPathExpr: Invalid value: "/$(B)": must be a relative path',
    ],
    [
      "a subPath with '..'",
      withContainer(
        { volumeMounts: [{ name: "w", mountPath: "/w", subPath: "a/../.." }] },
        { volumes: [{ name: "w", emptyDir: {} }] },
      ),
      `spec.containers[0].volumeMounts[0].subPath: Invalid value: "a/../..": must not contain '..'`,
    ],
  ];

  for (const [what, manifest, expected] of cases) {
    test(`rejects ${what} naming the field`, () => {
      expect(errorsOf(manifest)).toContainEqual(expect.stringContaining(expected));
    });
  }
});
