import { describe, expect, test } from "bun:test";
import { nodeMatches } from "../../../src/api/affinity.ts";
import { scaledValue, selectorMatches, validateDaemonSet } from "../../../src/api/daemonset.ts";
import { applyDaemonSetDefaults } from "../../../src/api/daemonset-defaults.ts";
import { formatFieldError, validatePod } from "../../../src/api/index.ts";
import { makeManifest } from "../../lib/builders.ts";

function ds(overrides: {
  metadata?: Record<string, unknown>;
  spec?: Record<string, unknown>;
  template?: Record<string, unknown>;
  podSpec?: Record<string, unknown>;
}) {
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { name: "web", ...overrides.metadata },
    spec: {
      selector: { matchLabels: { app: "web" } },
      template: {
        metadata: { labels: { app: "web" } },
        spec: { containers: [{ name: "main", image: "busybox" }], ...overrides.podSpec },
        ...overrides.template,
      },
      ...overrides.spec,
    },
  };
}

function errorsOf(obj: unknown): string[] {
  const r = validateDaemonSet(obj);
  return r.ok ? [] : r.errors.map(formatFieldError);
}

describe("validateDaemonSet()", () => {
  test("defaults what the API server defaults: strategy, history limit, the template's pod spec", () => {
    const r = validateDaemonSet(ds({}));
    if (!r.ok) throw new Error("invalid");
    expect(r.daemonSet.spec.updateStrategy).toEqual({
      type: "RollingUpdate",
      rollingUpdate: { maxUnavailable: 1, maxSurge: 0 },
    });
    expect(r.daemonSet.spec.revisionHistoryLimit).toBe(10);
    expect(r.daemonSet.spec.template.spec).toMatchObject({
      restartPolicy: "Always",
      terminationGracePeriodSeconds: 30,
      dnsPolicy: "ClusterFirst",
      securityContext: {},
    });
    expect(r.daemonSet.spec.template.spec.containers[0]).toMatchObject({
      imagePullPolicy: "Always",
      terminationMessagePath: "/dev/termination-log",
      terminationMessagePolicy: "File",
    });
  });

  test("keeps what is set, fills only what is not, and defaulting twice changes nothing", () => {
    const r = validateDaemonSet(
      ds({
        spec: {
          updateStrategy: { rollingUpdate: { maxUnavailable: "25%" } },
          revisionHistoryLimit: 2,
        },
      }),
    );
    if (!r.ok) throw new Error("invalid");
    expect(r.daemonSet.spec.updateStrategy).toEqual({
      type: "RollingUpdate",
      rollingUpdate: { maxUnavailable: "25%", maxSurge: 0 },
    });
    expect(r.daemonSet.spec.revisionHistoryLimit).toBe(2);
    expect(applyDaemonSetDefaults(r.daemonSet)).toEqual(r.daemonSet);
  });

  test("accepts a minimal DaemonSet and drops its status", () => {
    const r = validateDaemonSet({ ...ds({}), status: { numberReady: 3 } });
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.daemonSet).not.toHaveProperty("status");
  });

  const cases: [string, unknown, string][] = [
    ["a wrong apiVersion", { ...ds({}), apiVersion: "v1" }, 'apiVersion: Unsupported value: "v1"'],
    [
      "a selector that does not match the template labels",
      ds({ spec: { selector: { matchLabels: { app: "other" } } } }),
      "spec.template.metadata.labels: Invalid value: object: `selector` does not match template `labels`",
    ],
    [
      "an empty selector",
      ds({ spec: { selector: {} } }),
      "spec.selector: Invalid value: object: empty selector is invalid for daemonset",
    ],
    [
      "a restartPolicy other than Always",
      ds({ podSpec: { restartPolicy: "Never" } }),
      'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"',
    ],
    [
      "a container without an image",
      ds({ podSpec: { containers: [{ name: "main" }] } }),
      "spec.template.spec.containers[0].image: Required value",
    ],
    [
      "OnDelete",
      ds({ spec: { updateStrategy: { type: "OnDelete" } } }),
      'spec.updateStrategy.type: Unsupported value: "OnDelete": supported values: "RollingUpdate"',
    ],
    [
      "a maxUnavailable of 0",
      ds({ spec: { updateStrategy: { rollingUpdate: { maxUnavailable: 0 } } } }),
      "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0",
    ],
    [
      "a maxUnavailable over 100%",
      ds({ spec: { updateStrategy: { rollingUpdate: { maxUnavailable: "120%" } } } }),
      'spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: "120%": must not be greater than 100%',
    ],
    [
      "a maxSurge",
      ds({ spec: { updateStrategy: { rollingUpdate: { maxSurge: 1 } } } }),
      "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: fleetlet runs one pod of a name per device: only 0 is supported",
    ],
    [
      "a negative minReadySeconds",
      ds({ spec: { minReadySeconds: -1 } }),
      "spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0",
    ],
    [
      "a bad canary annotation",
      ds({ metadata: { annotations: { "rollout.fleetlet.io/canary": "some" } } }),
      'metadata.annotations[rollout.fleetlet.io/canary]: Invalid value: "some"',
    ],
    [
      "a bad progress deadline",
      ds({ metadata: { annotations: { "rollout.fleetlet.io/progress-deadline": "soon" } } }),
      'metadata.annotations[rollout.fleetlet.io/progress-deadline]: Invalid value: "soon": must be a positive duration',
    ],
    [
      "an In affinity expression without values",
      ds({
        podSpec: {
          affinity: {
            nodeAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: {
                nodeSelectorTerms: [{ matchExpressions: [{ key: "site", operator: "In" }] }],
              },
            },
          },
        },
      }),
      "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values: Required value",
    ],
    [
      "a nodeName in the template",
      ds({ podSpec: { nodeName: "cam-1" } }),
      "spec.template.spec.nodeName: Forbidden: the hub binds each pod to its device",
    ],
    ["a bad name", ds({ metadata: { name: "Web_1" } }), 'metadata.name: Invalid value: "Web_1"'],
  ];
  for (const [what, obj, expected] of cases) {
    test(`refuses ${what} with a field error`, () => {
      const errs = errorsOf(obj);
      expect(errs.some((e) => e.startsWith(expected))).toBe(true);
    });
  }
});

describe("node selection", () => {
  const labels = { site: "a", tier: "3", "kubernetes.io/hostname": "cam-1" };
  const required = (terms: unknown[]) => ({
    affinity: {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms },
      },
    },
  });
  const table: [string, unknown, boolean][] = [
    ["no selection", {}, true],
    ["a matching nodeSelector", { nodeSelector: { site: "a" } }, true],
    ["a nodeSelector with another value", { nodeSelector: { site: "b" } }, false],
    [
      "In",
      required([{ matchExpressions: [{ key: "site", operator: "In", values: ["a", "b"] }] }]),
      true,
    ],
    [
      "NotIn",
      required([{ matchExpressions: [{ key: "site", operator: "NotIn", values: ["a"] }] }]),
      false,
    ],
    ["Exists", required([{ matchExpressions: [{ key: "tier", operator: "Exists" }] }]), true],
    [
      "DoesNotExist",
      required([{ matchExpressions: [{ key: "gpu", operator: "DoesNotExist" }] }]),
      true,
    ],
    [
      "Gt",
      required([{ matchExpressions: [{ key: "tier", operator: "Gt", values: ["2"] }] }]),
      true,
    ],
    [
      "one of two terms",
      required([
        { matchExpressions: [{ key: "site", operator: "In", values: ["b"] }] },
        { matchExpressions: [{ key: "site", operator: "In", values: ["a"] }] },
      ]),
      true,
    ],
    ["an empty term", required([{}]), false],
    [
      "matchFields on the node name",
      required([{ matchFields: [{ key: "metadata.name", operator: "In", values: ["cam-1"] }] }]),
      true,
    ],
    [
      "a nodeSelector and affinity that disagree",
      {
        nodeSelector: { site: "a" },
        ...required([{ matchExpressions: [{ key: "tier", operator: "Lt", values: ["2"] }] }]),
      },
      false,
    ],
  ];
  for (const [what, spec, expected] of table) {
    test(`nodeMatches() with ${what} is ${expected}`, () => {
      expect(nodeMatches(spec as never, "cam-1", labels)).toBe(expected);
    });
  }

  test("a Pod manifest keeps its node affinity and owner references", () => {
    const r = validatePod({
      ...makeManifest(required([{ matchExpressions: [{ key: "site", operator: "Exists" }] }])),
      metadata: {
        name: "web",
        ownerReferences: [{ apiVersion: "apps/v1", kind: "DaemonSet", name: "web", uid: "u1" }],
      },
    });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.pod.metadata.ownerReferences?.[0]?.kind).toBe("DaemonSet");
    expect(r.pod.spec.affinity?.nodeAffinity).toBeDefined();
  });

  test("selectorMatches() ANDs matchLabels and matchExpressions", () => {
    const sel = {
      matchLabels: { app: "web" },
      matchExpressions: [{ key: "tier", operator: "In" as const, values: ["1"] }],
    };
    expect(selectorMatches(sel, { app: "web", tier: "1" })).toBe(true);
    expect(selectorMatches(sel, { app: "web", tier: "2" })).toBe(false);
  });

  test("scaledValue() rounds percents up", () => {
    expect(scaledValue("10%", 3)).toBe(1);
    expect(scaledValue("50%", 5)).toBe(3);
    expect(scaledValue(2, 10)).toBe(2);
  });
});
