import { describe, expect, test } from "bun:test";
import {
  ContainerConfigError,
  type EnvContext,
  makeEnvironment,
} from "../../../src/agent/kuberuntime/index.ts";
import type { ConfigMap, EnvVar, Secret } from "../../../src/api/index.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

const b64 = (s: string) => Buffer.from(s).toString("base64");
const configMaps: Record<string, ConfigMap> = {
  app: {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: "app", namespace: "default" },
    data: { MODE: "fast", "log.level": "info", "bad key": "x", "1st": "y" },
  },
};
const secrets: Record<string, Secret> = {
  creds: {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: "creds", namespace: "default" },
    data: { USER: b64("admin"), PASS: b64("pw") },
  },
};
const warnings: string[] = [];
const ctx: EnvContext = {
  nodeName: "node1",
  podIP: "",
  podIPs: [],
  hostIP: "192.168.1.2",
  objects: {
    configMap: (ns, name) => (ns === "default" ? configMaps[name] : undefined),
    secret: (ns, name) => (ns === "default" ? secrets[name] : undefined),
  },
  allocatable: { cpu: 4000, memory: 2 * 1024 ** 3, ephemeralStorage: 0 },
  onInvalidNames: (m) => warnings.push(m),
};
const pod = makePod({ name: "cam" });

function envOf(c: Parameters<typeof makeContainer>[0]) {
  return makeEnvironment(pod, makeContainer(c), ctx).map((e) => `${e.key}=${e.value}`);
}

describe("makeEnvironment() with ConfigMaps and Secrets", () => {
  test("reads configMapKeyRef and secretKeyRef values, leaving out optional ones that find nothing", () => {
    const env: EnvVar[] = [
      { name: "M", valueFrom: { configMapKeyRef: { name: "app", key: "MODE" } } },
      { name: "U", valueFrom: { secretKeyRef: { name: "creds", key: "USER" } } },
      { name: "GONE", valueFrom: { configMapKeyRef: { name: "nope", key: "k", optional: true } } },
      { name: "NOKEY", valueFrom: { secretKeyRef: { name: "creds", key: "zz", optional: true } } },
      { name: "URL", value: "$(U)@$(M)" },
    ];
    expect(envOf({ env })).toEqual(["M=fast", "U=admin", "URL=admin@fast"]);
  });

  test("a missing object or key is a ContainerConfigError with the kubelet's message", () => {
    const cases: [EnvVar, string][] = [
      [
        { name: "X", valueFrom: { configMapKeyRef: { name: "nope", key: "k" } } },
        'configmap "nope" not found',
      ],
      [
        { name: "X", valueFrom: { secretKeyRef: { name: "nope", key: "k" } } },
        'secret "nope" not found',
      ],
      [
        { name: "X", valueFrom: { configMapKeyRef: { name: "app", key: "k" } } },
        "couldn't find key k in ConfigMap default/app",
      ],
      [
        { name: "X", valueFrom: { secretKeyRef: { name: "creds", key: "k" } } },
        "couldn't find key k in Secret default/creds",
      ],
    ];
    for (const [e, message] of cases) {
      expect(() => envOf({ env: [e] })).toThrow(ContainerConfigError);
      expect(() => envOf({ env: [e] })).toThrow(message);
    }
  });

  test("envFrom takes every valid key with its prefix, skips invalid names with the kubelet's warning, and env overrides it", () => {
    warnings.length = 0;
    const got = envOf({
      envFrom: [
        { prefix: "APP_", configMapRef: { name: "app" } },
        { secretRef: { name: "creds" } },
        { configMapRef: { name: "nope", optional: true } },
      ],
      env: [{ name: "USER", value: "override" }],
    });
    expect(got).toEqual([
      "APP_1st=y",
      "APP_MODE=fast",
      "APP_log.level=info",
      "PASS=pw",
      "USER=override",
    ]);
    expect(warnings).toEqual([
      "Keys [APP_bad key] from the EnvFrom configMap default/app were skipped since they are considered invalid environment variable names.",
    ]);
    expect(() => envOf({ envFrom: [{ secretRef: { name: "nope" } }] })).toThrow(
      'secret "nope" not found',
    );
  });

  test("resourceFieldRef reads the container's own limits, node allocatable when it has none", () => {
    const env: EnvVar[] = [
      {
        name: "MEM",
        valueFrom: { resourceFieldRef: { resource: "limits.memory", divisor: "1Mi" } },
      },
      { name: "CPU", valueFrom: { resourceFieldRef: { resource: "limits.cpu", divisor: "1m" } } },
    ];
    expect(envOf({ env, resources: { limits: { memory: "64Mi" } } })).toEqual([
      "MEM=64",
      "CPU=4000",
    ]);
  });
});
