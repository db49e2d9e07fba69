import { describe, expect, test } from "bun:test";
import {
  applyPodDefaults,
  defaultPullPolicy,
  type Pod,
  type PullPolicy,
  validatePod,
} from "../../../src/api/index.ts";
import { makeContainer, makeManifest, makePod } from "../../lib/builders.ts";

function decode(manifest: unknown): Pod {
  const r = validatePod(manifest);
  if (!r.ok) throw new Error(`invalid test manifest: ${JSON.stringify(r.errors)}`);
  return r.pod;
}

describe("applyPodDefaults()", () => {
  test("fills the pod-level defaults of the API server", () => {
    const pod = applyPodDefaults(decode(makeManifest()));
    expect(pod.metadata.namespace).toBe("default");
    expect(pod.spec.restartPolicy).toBe("Always");
    expect(pod.spec.terminationGracePeriodSeconds).toBe(30);
    expect(pod.spec.dnsPolicy).toBe("ClusterFirst");
  });

  test("fills container defaults for init and app containers", () => {
    const pod = applyPodDefaults(
      decode(makeManifest({ initContainers: [{ name: "init", image: "busybox" }] })),
    );
    for (const c of [pod.spec.containers[0], pod.spec.initContainers?.[0]]) {
      expect(c?.terminationMessagePath).toBe("/dev/termination-log");
      expect(c?.terminationMessagePolicy).toBe("File");
      expect(c?.imagePullPolicy).toBeDefined();
    }
  });

  test("keeps values that are set", () => {
    const manifest = makeManifest(
      { restartPolicy: "Never", terminationGracePeriodSeconds: 0, dnsPolicy: "Default" },
      { namespace: "edge" },
    );
    const pod = applyPodDefaults(decode(manifest));
    expect(pod.metadata.namespace).toBe("edge");
    expect(pod.spec.restartPolicy).toBe("Never");
    expect(pod.spec.terminationGracePeriodSeconds).toBe(0);
    expect(pod.spec.dnsPolicy).toBe("Default");
  });

  test("does not modify its input", () => {
    const input = decode(
      makeManifest({ containers: [{ name: "a", image: "x", ports: [{ containerPort: 80 }] }] }),
    );
    const copy = structuredClone(input);
    applyPodDefaults(input);
    expect(input).toEqual(copy);
  });

  test("defaults port protocol to TCP and hostPort to containerPort on the host network", () => {
    const ports = [{ containerPort: 80 }, { containerPort: 53, protocol: "UDP" }];
    const pod = applyPodDefaults(
      decode(makeManifest({ hostNetwork: true, containers: [{ name: "a", image: "x", ports }] })),
    );
    expect(pod.spec.containers[0]?.ports).toEqual([
      { containerPort: 80, hostPort: 80, protocol: "TCP" },
      { containerPort: 53, hostPort: 53, protocol: "UDP" },
    ]);
  });

  test("defaults probe timings, thresholds and httpGet path and scheme", () => {
    const probe = { httpGet: { port: 80 }, periodSeconds: 0, failureThreshold: 5 };
    const pod = makePod({ containers: [makeContainer({ livenessProbe: probe })] });
    expect(pod.spec.containers[0]?.livenessProbe).toEqual({
      httpGet: { port: 80, path: "/", scheme: "HTTP" },
      timeoutSeconds: 1,
      periodSeconds: 10,
      successThreshold: 1,
      failureThreshold: 5,
    });
  });

  test("copies each limit without a request into requests", () => {
    const resources = { limits: { cpu: "1", memory: "1Gi" }, requests: { cpu: "250m" } };
    const pod = makePod({ containers: [makeContainer({ resources })] });
    expect(pod.spec.containers[0]?.resources).toEqual({
      limits: { cpu: "1", memory: "1Gi" },
      requests: { cpu: "250m", memory: "1Gi" },
    });
  });

  test("defaults fieldRef apiVersion to v1", () => {
    const env = [{ name: "N", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } }];
    const pod = makePod({ containers: [makeContainer({ env })] });
    expect(pod.spec.containers[0]?.env?.[0]?.valueFrom?.fieldRef?.apiVersion).toBe("v1");
  });
});

describe("defaultPullPolicy()", () => {
  const cases: [string, PullPolicy][] = [
    ["nginx", "Always"],
    ["nginx:latest", "Always"],
    ["nginx:1.25", "IfNotPresent"],
    ["registry.local:5000/nginx", "Always"],
    ["registry.local:5000/nginx:1.25", "IfNotPresent"],
    ["nginx@sha256:0123abcd", "IfNotPresent"],
    ["nginx:latest@sha256:0123abcd", "IfNotPresent"],
  ];
  for (const [image, policy] of cases) {
    test(`is ${policy} for ${image}`, () => {
      expect(defaultPullPolicy(image)).toBe(policy);
    });
  }
});

describe("makePod()", () => {
  test("builds a pod that validates and is already defaulted", () => {
    const pod = makePod({ name: "cam", labels: { app: "cam" } });
    const r = validatePod(pod);
    expect(r.ok).toBe(true);
    expect(applyPodDefaults(pod)).toEqual(pod);
    expect(pod.metadata.uid).toBe("uid-default-cam");
  });
});
