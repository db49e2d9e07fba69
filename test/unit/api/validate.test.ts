import { describe, expect, test } from "bun:test";
import { formatInvalidObject, validatePod } from "../../../src/api/index.ts";
import { makeManifest, manifestErrors, manifestWithContainer } from "../../lib/builders.ts";

const errorsOf = manifestErrors;
const withContainer = manifestWithContainer;

describe("validatePod()", () => {
  test("accepts a minimal manifest and returns it without defaults", () => {
    const r = validatePod(makeManifest());
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.pod.metadata.name).toBe("web");
    expect(r.pod.metadata.namespace).toBeUndefined();
    expect(r.pod.spec.containers[0]?.imagePullPolicy).toBeUndefined();
  });

  test("ignores unknown fields and drops status, keeping known ones", () => {
    const m = { ...withContainer({ foo: 1 }, { overhead: {} }), status: { phase: "Running" } };
    const r = validatePod({ ...m, extra: true });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.pod).not.toHaveProperty("status");
    expect(r.pod.spec).not.toHaveProperty("overhead");
    expect(r.pod.spec.containers[0]).not.toHaveProperty("foo");
  });

  test("treats null fields as unset", () => {
    expect(errorsOf(withContainer({ env: null }, { volumes: null }))).toEqual([]);
  });

  test("turns YAML numbers in resources into quantity strings", () => {
    const r = validatePod(withContainer({ resources: { limits: { cpu: 0.5, memory: 1024 } } }));
    expect(r.ok && r.pod.spec.containers[0]?.resources?.limits).toEqual({
      cpu: "0.5",
      memory: "1024",
    });
  });

  const cases: [string, unknown, string][] = [
    ["a non-object manifest", "pod", 'Invalid value: "pod": must be of type object'],
    [
      "a missing apiVersion",
      { ...makeManifest(), apiVersion: undefined },
      "apiVersion: Required value",
    ],
    [
      "a kind other than Pod",
      { ...makeManifest(), kind: "Deployment" },
      'kind: Unsupported value: "Deployment": supported values: "Pod"',
    ],
    [
      "a name that is not a DNS-1123 subdomain",
      makeManifest({}, { name: "Foo_Bar" }),
      'metadata.name: Invalid value: "Foo_Bar": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters',
    ],
    [
      "a name longer than 253 characters",
      makeManifest({}, { name: "a".repeat(254) }),
      "must be no more than 253 characters",
    ],
    ["an empty name", makeManifest({}, { name: "" }), "metadata.name: Required value"],
    [
      "a namespace that is not a DNS-1123 label",
      makeManifest({}, { namespace: "a.b" }),
      'metadata.namespace: Invalid value: "a.b": a lowercase RFC 1123 label must consist of',
    ],
    [
      "a label value with spaces",
      makeManifest({}, { labels: { app: "my app" } }),
      'metadata.labels[app]: Invalid value: "my app": a valid label must be an empty string',
    ],
    [
      "a non-string label value",
      makeManifest({}, { labels: { version: 2 } }),
      "metadata.labels[version]: Invalid value: 2: must be of type string",
    ],
    ["missing containers", { ...makeManifest(), spec: {} }, "spec.containers: Required value"],
    [
      "an empty container list",
      makeManifest({ containers: [] }),
      "spec.containers: Required value",
    ],
    [
      "containers that are not an array",
      makeManifest({ containers: "nginx" }),
      'spec.containers: Invalid value: "nginx": must be of type array',
    ],
    [
      "a container without image",
      makeManifest({ containers: [{ name: "app" }] }),
      "spec.containers[0].image: Required value",
    ],
    ["an empty image", withContainer({ image: "" }), "spec.containers[0].image: Required value"],
    [
      "a container name that is not a DNS-1123 label",
      withContainer({ name: "My_App" }),
      'spec.containers[0].name: Invalid value: "My_App": a lowercase RFC 1123 label',
    ],
    [
      "duplicate container names across init and app containers",
      makeManifest({ initContainers: [{ name: "app", image: "busybox" }] }),
      'spec.containers[0].name: Duplicate value: "app"',
    ],
    [
      "a restartPolicy outside the enum",
      makeManifest({ restartPolicy: "Sometimes" }),
      'spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"',
    ],
    [
      "an imagePullPolicy outside the enum",
      withContainer({ imagePullPolicy: "Sometimes" }),
      'spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never"',
    ],
    [
      "a containerPort out of range",
      withContainer({ ports: [{ containerPort: 70000 }] }),
      "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
    ],
    [
      "a containerPort given as a string",
      withContainer({ ports: [{ containerPort: "80" }] }),
      'spec.containers[0].ports[0].containerPort: Invalid value: "80": must be of type integer',
    ],
    [
      "a port name longer than 15 characters",
      withContainer({ ports: [{ containerPort: 80, name: "a-very-long-port-name" }] }),
      'spec.containers[0].ports[0].name: Invalid value: "a-very-long-port-name": must be no more than 15 characters',
    ],
    [
      "a port name without a letter",
      withContainer({ ports: [{ containerPort: 80, name: "8080" }] }),
      "must contain at least one letter (a-z)",
    ],
    [
      "duplicate host ports",
      makeManifest({
        containers: [
          { name: "a", image: "x", ports: [{ containerPort: 80, hostPort: 8080 }] },
          { name: "b", image: "x", ports: [{ containerPort: 81, hostPort: 8080 }] },
        ],
      }),
      'spec.containers[1].ports[0].hostPort: Duplicate value: "8080/TCP"',
    ],
    [
      "an env name starting with a digit",
      withContainer({ env: [{ name: "1X", value: "y" }] }),
      'spec.containers[0].env[0].name: Invalid value: "1X": a valid environment variable name',
    ],
    [
      "an unsupported fieldRef path",
      withContainer({ env: [{ name: "X", valueFrom: { fieldRef: { fieldPath: "spec.foo" } } }] }),
      'spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Unsupported value: "spec.foo"',
    ],
    [
      "an env valueFrom with no source",
      withContainer({ env: [{ name: "X", valueFrom: { fileKeyRef: { path: "p" } } }] }),
      'spec.containers[0].env[0].valueFrom: Invalid value: "": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`',
    ],
    [
      "a probe with two handlers",
      withContainer({ livenessProbe: { exec: { command: ["true"] }, httpGet: { port: 80 } } }),
      "spec.containers[0].livenessProbe.httpGet: Forbidden: may not specify more than 1 handler type",
    ],
    [
      "a probe with no handler",
      withContainer({ readinessProbe: { periodSeconds: 5 } }),
      "spec.containers[0].readinessProbe: Required value: must specify a handler type",
    ],
    [
      "a negative periodSeconds",
      withContainer({ readinessProbe: { tcpSocket: { port: 80 }, periodSeconds: -1 } }),
      "spec.containers[0].readinessProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0",
    ],
    [
      "a fractional periodSeconds",
      withContainer({ readinessProbe: { tcpSocket: { port: 80 }, periodSeconds: 1.5 } }),
      "spec.containers[0].readinessProbe.periodSeconds: Invalid value: 1.5: must be of type integer",
    ],
    [
      "a liveness successThreshold other than 1",
      withContainer({ livenessProbe: { grpc: { port: 9000 }, successThreshold: 2 } }),
      "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
    ],
    [
      "a startup successThreshold other than 1",
      withContainer({ startupProbe: { exec: { command: ["x"] }, successThreshold: 3 } }),
      "spec.containers[0].startupProbe.successThreshold: Invalid value: 3: must be 1",
    ],
    [
      "an exec probe without a command",
      withContainer({ livenessProbe: { exec: {} } }),
      "spec.containers[0].livenessProbe.exec.command: Required value",
    ],
    [
      "an httpGet probe port out of range",
      withContainer({ livenessProbe: { httpGet: { port: 0 } } }),
      "spec.containers[0].livenessProbe.httpGet.port: Invalid value: 0: must be between 1 and 65535, inclusive",
    ],
    [
      "a probe on a plain init container",
      makeManifest({
        initContainers: [{ name: "init", image: "x", readinessProbe: { tcpSocket: { port: 1 } } }],
      }),
      "spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always",
    ],
    [
      "a lifecycle hook with two handlers",
      withContainer({
        lifecycle: { preStop: { exec: { command: ["x"] }, sleep: { seconds: 1 } } },
      }),
      "spec.containers[0].lifecycle.preStop.sleep: Forbidden: may not specify more than 1 handler type",
    ],
    [
      "a lifecycle hook with no handler",
      withContainer({ lifecycle: { postStart: {} } }),
      "spec.containers[0].lifecycle.postStart: Required value: must specify a handler type",
    ],
    [
      "a preStop sleep longer than the grace period",
      withContainer(
        { lifecycle: { preStop: { sleep: { seconds: 60 } } } },
        { terminationGracePeriodSeconds: 10 },
      ),
      "spec.containers[0].lifecycle.preStop.sleep.seconds: Invalid value: 60: must be between 0 and the pod's terminationGracePeriodSeconds (10), inclusive",
    ],
    [
      "limits below requests",
      withContainer({ resources: { requests: { cpu: "2" }, limits: { cpu: "1500m" } } }),
      'spec.containers[0].resources.requests[cpu]: Invalid value: "2": must be less than or equal to cpu limit of 1500m',
    ],
    [
      "an unparseable quantity",
      withContainer({ resources: { limits: { memory: "12 GB" } } }),
      'spec.containers[0].resources.limits[memory]: Invalid value: "12 GB": quantities must match the regular expression',
    ],
    [
      "a negative quantity",
      withContainer({ resources: { requests: { cpu: "-1" } } }),
      'spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0',
    ],
    [
      "a non-standard resource name",
      withContainer({ resources: { limits: { gpu: "1" } } }),
      'spec.containers[0].resources.limits[gpu]: Invalid value: "gpu": must be a standard resource for containers',
    ],
    [
      "a device count that is not whole",
      withContainer({ resources: { limits: { "fleetlet.io/serial": "500m" } } }),
      'spec.containers[0].resources.limits[fleetlet.io/serial]: Invalid value: "500m": must be an integer',
    ],
    [
      "a device request other than its limit",
      withContainer({
        resources: {
          requests: { "fleetlet.io/serial": "2" },
          limits: { "fleetlet.io/serial": "1" },
        },
      }),
      'spec.containers[0].resources.requests[fleetlet.io/serial]: Invalid value: "2": must be equal to fleetlet.io/serial limit of 1',
    ],
    [
      "a volume mount naming no volume",
      withContainer({ volumeMounts: [{ name: "data", mountPath: "/data" }] }),
      'spec.containers[0].volumeMounts[0].name: Not found: "data"',
    ],
    [
      "a volume without a source",
      makeManifest({ volumes: [{ name: "cfg", persistentVolumeClaim: { claimName: "x" } }] }),
      "spec.volumes[0]: Required value: must specify a volume type",
    ],
    [
      "dnsPolicy None without dnsConfig",
      makeManifest({ dnsPolicy: "None" }),
      "spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None",
    ],
    [
      "a host port differing from the container port on the host network",
      withContainer({ ports: [{ containerPort: 80, hostPort: 8080 }] }, { hostNetwork: true }),
      "spec.containers[0].ports[0].hostPort: Invalid value: 8080: must match `containerPort` when `hostNetwork` is true",
    ],
    [
      "privileged with allowPrivilegeEscalation false",
      withContainer({ securityContext: { privileged: true, allowPrivilegeEscalation: false } }),
      "spec.containers[0].securityContext.allowPrivilegeEscalation: Invalid value: false: cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
    ],
    [
      "a restartPolicy on an app container",
      withContainer({ restartPolicy: "Always" }),
      "spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers",
    ],
  ];

  for (const [what, manifest, expected] of cases) {
    test(`rejects ${what} naming the field`, () => {
      expect(errorsOf(manifest)).toContainEqual(expect.stringContaining(expected));
    });
  }

  test("formats errors the way kubectl does", () => {
    const r = validatePod(makeManifest({ containers: [{ name: "app" }] }, { name: "Foo_Bar" }));
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(formatInvalidObject("Pod", "Foo_Bar", r.errors)).toBe(
      'The Pod "Foo_Bar" is invalid: spec.containers[0].image: Required value',
    );
    const two = [...r.errors, ...r.errors];
    expect(formatInvalidObject("Pod", "x", two)).toStartWith('The Pod "x" is invalid: \n* spec');
  });

  test("drops a __proto__ key instead of changing the prototype", () => {
    const r = validatePod(
      JSON.parse(
        '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","labels":{"__proto__":{"x":1}}},"spec":{"containers":[{"name":"a","image":"b"}]}}',
      ),
    );
    expect(r.ok).toBe(true);
  });

  test("reports every value error at once", () => {
    const errors = errorsOf(
      makeManifest(
        {
          containers: [
            { name: "A", image: "" },
            { name: "A", image: "x" },
          ],
        },
        { name: "X" },
      ),
    );
    expect(errors.length).toBeGreaterThanOrEqual(4);
  });

  test("accepts a sidecar init container with probes and a full-featured pod", () => {
    const manifest = makeManifest({
      hostNetwork: true,
      volumes: [
        { name: "data", emptyDir: { sizeLimit: "1Gi" } },
        { name: "dev", hostPath: { path: "/dev" } },
      ],
      initContainers: [
        {
          name: "proxy",
          image: "envoy:1",
          restartPolicy: "Always",
          readinessProbe: { tcpSocket: { port: 1 } },
        },
      ],
      containers: [
        {
          name: "app",
          image: "registry.local:5000/app@sha256:abc",
          ports: [{ name: "http", containerPort: 8080 }],
          env: [{ name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } }],
          resources: {
            requests: { cpu: "100m", memory: "64Mi" },
            limits: { cpu: 1, memory: "1Gi" },
          },
          volumeMounts: [{ name: "data", mountPath: "/data" }],
          livenessProbe: { httpGet: { port: "http", path: "/healthz" }, successThreshold: 1 },
          lifecycle: { preStop: { sleep: { seconds: 5 } } },
        },
      ],
    });
    expect(errorsOf(manifest)).toEqual([]);
  });
});

describe("validatePod() tolerations", () => {
  test("keeps valid tolerations", () => {
    const tolerations = [
      { key: "node.kubernetes.io/memory-pressure", operator: "Exists", effect: "NoSchedule" },
      { key: "team", operator: "Equal", value: "edge" },
      { operator: "Exists" },
      { key: "k", effect: "NoExecute", tolerationSeconds: 30 },
    ];
    const r = validatePod(withContainer({}, { tolerations }));
    expect(r.ok && r.pod.spec.tolerations).toEqual(tolerations);
  });

  const bad: [string, unknown, string][] = [
    [
      "an empty key without Exists",
      { operator: "Equal" },
      'spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when `key` is empty, which means "match all values and all keys"',
    ],
    [
      "an unknown operator",
      { key: "k", operator: "In" },
      'spec.tolerations[0].operator: Unsupported value: "In": supported values: "Equal", "Exists"',
    ],
    [
      "an unknown effect",
      { key: "k", effect: "Sometimes" },
      'spec.tolerations[0].effect: Unsupported value: "Sometimes": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"',
    ],
    [
      "tolerationSeconds without NoExecute",
      { key: "k", effect: "NoSchedule", tolerationSeconds: 5 },
      "spec.tolerations[0].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set",
    ],
    [
      "a key that is not a label name",
      { key: "bad key", operator: "Exists" },
      'spec.tolerations[0].key: Invalid value: "bad key"',
    ],
  ];
  for (const [what, toleration, message] of bad) {
    test(`rejects ${what}`, () => {
      const errors = errorsOf(withContainer({}, { tolerations: [toleration] }));
      expect(errors.some((e) => e.startsWith(message))).toBe(true);
    });
  }
});
