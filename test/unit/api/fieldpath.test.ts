import { describe, expect, test } from "bun:test";
import { podFieldValue, resourceFieldValue } from "../../../src/api/index.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

const allocatable = { cpu: 4000, memory: 8 * 1024 ** 3, ephemeralStorage: 64 * 1024 ** 3 };
const app = makeContainer({
  name: "app",
  resources: {
    requests: { cpu: "250m", memory: "100Mi" },
    limits: { cpu: "1500m", memory: "128Mi" },
  },
});
const bare = makeContainer({ name: "bare" });
const pod = makePod({
  name: "cam",
  labels: { b: "2", a: "1" },
  containers: [app, bare],
});
const ctx = {
  nodeName: "dev1",
  podIP: "10.1.0.5",
  podIPs: ["10.1.0.5", "fd00::5"],
  hostIP: "192.168.1.2",
};

describe("podFieldValue()", () => {
  const cases: [string, string][] = [
    ["metadata.name", "cam"],
    ["metadata.namespace", "default"],
    ["metadata.uid", "uid-default-cam"],
    ["metadata.labels", 'a="1"\nb="2"'],
    ["metadata.labels['b']", "2"],
    ["spec.nodeName", "dev1"],
    ["status.podIPs", "10.1.0.5,fd00::5"],
    ["status.hostIP", "192.168.1.2"],
  ];
  for (const [path, value] of cases) {
    test(`reads ${path}`, () => expect(podFieldValue(pod, path, ctx)).toBe(value));
  }
  test("refuses a path the downward API does not know", () => {
    expect(() => podFieldValue(pod, "spec.hostname", ctx)).toThrow(
      'unsupported fieldPath "spec.hostname"',
    );
  });
});

describe("resourceFieldValue()", () => {
  const cases: [string, string | undefined, string, string | undefined, string][] = [
    ["cpu limit in cores, rounded up", "app", "limits.cpu", undefined, "2"],
    ["cpu limit in millicores", "app", "limits.cpu", "1m", "1500"],
    ["cpu request", "app", "requests.cpu", "1m", "250"],
    ["memory limit in MiB", "app", "limits.memory", "1Mi", "128"],
    ["memory request in bytes", "app", "requests.memory", undefined, String(100 * 1024 * 1024)],
    ["a missing limit as node allocatable", "bare", "limits.memory", "1Gi", "8"],
    ["a missing cpu limit as node allocatable", "bare", "limits.cpu", undefined, "4"],
    ["a missing request as 0", "bare", "requests.memory", undefined, "0"],
  ];
  for (const [what, container, resource, divisor, value] of cases) {
    test(`reads ${what}`, () => {
      const ref = { containerName: container, resource, ...(divisor ? { divisor } : {}) };
      expect(resourceFieldValue(pod, undefined, ref, allocatable)).toBe(value);
    });
  }
  test("reads the container itself when the selector names none (env)", () => {
    expect(
      resourceFieldValue(pod, app, { resource: "limits.memory", divisor: "1Mi" }, allocatable),
    ).toBe("128");
  });
  test("refuses a container the pod does not have", () => {
    expect(() =>
      resourceFieldValue(
        pod,
        undefined,
        { containerName: "x", resource: "limits.cpu" },
        allocatable,
      ),
    ).toThrow('container "x" not found');
  });
});
