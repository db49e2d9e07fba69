import { describe, expect, test } from "bun:test";
import type { ContainerAllocation } from "../../../src/agent/cm/devicemanager/index.ts";
import { withDevices } from "../../../src/agent/kuberuntime/devices.ts";
import type { ContainerConfig } from "../../../src/cri/index.ts";

const base: ContainerConfig = {
  metadata: { name: "reader", attempt: 0 },
  image: { image: "sha256:abc" },
  envs: [{ key: "PORT", value: "/dev/ttyUSB0" }],
  mounts: [{ containerPath: "/data", hostPath: "/var/lib/fleetlet/pods/u/volumes/data" }],
  annotations: { "io.kubernetes.container.hash": "1" },
};

const allocation: ContainerAllocation = {
  envs: { PORT: "/dev/plugin", VENDOR_DEVICES: "a,b" },
  mounts: [{ containerPath: "/opt/vendor", hostPath: "/usr/lib/vendor", readOnly: true }],
  devices: [{ containerPath: "/dev/x0", hostPath: "/dev/x0", permissions: "rw" }],
  annotations: { "vendor.example/slot": "3", "io.kubernetes.container.hash": "plugin" },
  cdiDevices: ["vendor.example/gpu=0", "vendor.example/gpu=1"],
};

describe("withDevices()", () => {
  test("leaves a container without devices as it is", () => {
    expect(withDevices(base, undefined)).toBe(base);
  });

  test("adds device nodes, the plugin's mounts after the volumes, and its env before the container's own", () => {
    const c = withDevices(base, allocation);
    expect(c.devices).toEqual([
      { containerPath: "/dev/x0", hostPath: "/dev/x0", permissions: "rw" },
    ]);
    expect(c.mounts?.map((m) => m.containerPath)).toEqual(["/data", "/opt/vendor"]);
    expect(c.mounts?.[1]?.readonly).toBe(true);
    // The runtime keeps the last value of a name: the container's own PORT wins.
    expect(c.envs).toEqual([
      { key: "PORT", value: "/dev/plugin" },
      { key: "VENDOR_DEVICES", value: "a,b" },
      { key: "PORT", value: "/dev/ttyUSB0" },
    ]);
  });

  test("keeps the container's own annotations over the plugin's", () => {
    const c = withDevices(base, allocation);
    expect(c.annotations?.["io.kubernetes.container.hash"]).toBe("1");
    expect(c.annotations?.["vendor.example/slot"]).toBe("3");
  });

  test("gives CDI devices in the CRI field and in the annotation older runtimes read", () => {
    const c = withDevices(base, allocation);
    expect(c.CDIDevices).toEqual([
      { name: "vendor.example/gpu=0" },
      { name: "vendor.example/gpu=1" },
    ]);
    expect(c.annotations?.["cdi.k8s.io/fleetlet_reader"]).toBe(
      "vendor.example/gpu=0,vendor.example/gpu=1",
    );
    const none = withDevices(base, { ...allocation, cdiDevices: [] });
    expect(none.CDIDevices).toBeUndefined();
    expect(Object.keys(none.annotations ?? {}).some((k) => k.startsWith("cdi.k8s.io/"))).toBe(
      false,
    );
  });
});
