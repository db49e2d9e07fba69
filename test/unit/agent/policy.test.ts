import { describe, expect, test } from "bun:test";
import { AGENT_CONFIG_DEFAULTS, type HubPodPolicy } from "../../../src/agent/config/index.ts";
import { createPolicyAdmission, policyViolations } from "../../../src/agent/policy/index.ts";
import type { Pod } from "../../../src/api/types.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

const base: HubPodPolicy = AGENT_CONFIG_DEFAULTS.hubPodPolicy;

function hubPod(name: string, o: Parameters<typeof makePod>[0] = {}): Pod {
  const pod = makePod({ name, ...o });
  return {
    ...pod,
    metadata: {
      ...pod.metadata,
      annotations: { ...pod.metadata.annotations, "kubernetes.io/config.source": "api" },
    },
  };
}

describe("device policy for hub pods", () => {
  const table: [string, Pod, Partial<HubPodPolicy>, string[]][] = [
    ["a plain pod", hubPod("a"), {}, []],
    [
      "a privileged container",
      hubPod("a", { containers: [makeContainer({ securityContext: { privileged: true } })] }),
      {},
      [
        "spec.containers[0].securityContext.privileged: privileged containers are not allowed (hubPodPolicy.allowPrivileged is false)",
      ],
    ],
    [
      "a privileged container when allowed",
      hubPod("a", { containers: [makeContainer({ securityContext: { privileged: true } })] }),
      { allowPrivileged: true },
      [],
    ],
    [
      "added capabilities beyond the default set",
      hubPod("a", {
        containers: [
          makeContainer({
            securityContext: { capabilities: { add: ["CHOWN", "NET_ADMIN", "cap_sys_admin"] } },
          }),
        ],
      }),
      {},
      [
        "spec.containers[0].securityContext.capabilities.add: NET_ADMIN, cap_sys_admin not allowed (hubPodPolicy.allowedCapabilities: [])",
      ],
    ],
    [
      "added capabilities the policy allows (names with or without CAP_)",
      hubPod("a", {
        containers: [
          makeContainer({
            securityContext: { capabilities: { add: ["NET_ADMIN", "CAP_NET_RAW", "KILL"] } },
          }),
        ],
      }),
      { allowedCapabilities: ["CAP_NET_ADMIN", "net_raw"] },
      [],
    ],
    [
      "ALL capabilities, unless the policy allows ALL",
      hubPod("a", {
        containers: [makeContainer({ securityContext: { capabilities: { add: ["ALL"] } } })],
      }),
      { allowedCapabilities: ["NET_ADMIN"] },
      [
        'spec.containers[0].securityContext.capabilities.add: ALL not allowed (hubPodPolicy.allowedCapabilities: ["NET_ADMIN"])',
      ],
    ],
    [
      "any capability when the policy allows ALL",
      hubPod("a", {
        containers: [makeContainer({ securityContext: { capabilities: { add: ["SYS_ADMIN"] } } })],
      }),
      { allowedCapabilities: ["ALL"] },
      [],
    ],
    [
      "the host network",
      hubPod("a", { spec: { hostNetwork: true } }),
      {},
      [
        "spec.hostNetwork: hub pods may not use the host's network (hubPodPolicy.allowHostNetwork is false)",
      ],
    ],
    [
      "a hostPath with no prefixes allowed",
      hubPod("a", { spec: { volumes: [{ name: "d", hostPath: { path: "/data" } }] } }),
      {},
      [
        'spec.volumes[0].hostPath.path: "/data" is not under an allowed prefix (hubPodPolicy.allowedHostPathPrefixes is empty: no hostPath volumes)',
      ],
    ],
    [
      "a hostPath under an allowed prefix",
      hubPod("a", { spec: { volumes: [{ name: "d", hostPath: { path: "/data/cam" } }] } }),
      { allowedHostPathPrefixes: ["/data/"] },
      [],
    ],
    [
      "a hostPath escaping its prefix with ..",
      hubPod("a", { spec: { volumes: [{ name: "d", hostPath: { path: "/data/../etc" } }] } }),
      { allowedHostPathPrefixes: ["/data"] },
      [
        'spec.volumes[0].hostPath.path: "/data/../etc" is not under an allowed prefix (hubPodPolicy.allowedHostPathPrefixes: ["/data"])',
      ],
    ],
    [
      "a hostPath that only shares the prefix's letters",
      hubPod("a", { spec: { volumes: [{ name: "d", hostPath: { path: "/database" } }] } }),
      { allowedHostPathPrefixes: ["/data"] },
      [
        'spec.volumes[0].hostPath.path: "/database" is not under an allowed prefix (hubPodPolicy.allowedHostPathPrefixes: ["/data"])',
      ],
    ],
    [
      "an image from another registry (a bare name is docker.io)",
      hubPod("a", { containers: [makeContainer({ image: "busybox" })] }),
      { allowedRegistries: ["127.0.0.1:5000"] },
      [
        'spec.containers[0].image: registry "docker.io" of "busybox" is not allowed (hubPodPolicy.allowedRegistries: ["127.0.0.1:5000"])',
      ],
    ],
    [
      "an image from an allowed registry",
      hubPod("a", { containers: [makeContainer({ image: "127.0.0.1:5000/x/busybox:1" })] }),
      { allowedRegistries: ["127.0.0.1:5000"] },
      [],
    ],
  ];
  for (const [what, pod, policy, expected] of table) {
    test(`policyViolations() for ${what}`, () => {
      expect(policyViolations(pod, { ...base, ...policy })).toEqual(expected);
    });
  }

  test("admit() refuses with reason DevicePolicy and leaves file pods alone", () => {
    const admission = createPolicyAdmission(base);
    const privileged = { containers: [makeContainer({ securityContext: { privileged: true } })] };
    expect(admission.admit(makePod({ name: "file", ...privileged }), [])).toBeUndefined();
    const refused = admission.admit(hubPod("hub", privileged), []);
    expect(refused?.reason).toBe("DevicePolicy");
    expect(refused?.message).toStartWith("hub pod breaks this device's policy: spec.containers[0]");
  });

  test("admit() refuses a hub pod over maxPods, counting other hub pods only", () => {
    const admission = createPolicyAdmission({ ...base, maxPods: 1 });
    const active = [hubPod("one"), makePod({ name: "file" })];
    expect(admission.admit(hubPod("two"), active)?.message).toContain(
      "this device runs at most 1 hub pods (hubPodPolicy.maxPods), and 1 run",
    );
    expect(admission.admit(hubPod("two"), [makePod({ name: "file" })])).toBeUndefined();
  });
});
