// The guest's systemd flavour (scripts/vdevice build --systemd): a device booted with systemd as
// init, whose containerd runs runc with SystemdCgroup = true, as the Kubernetes docs set it on
// systemd machines. fleetlet's systemd cgroup driver is not built yet, so the agent (cgroupfs)
// must refuse to start there with one line, and never make a pod. Needs root and user-mode Linux.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eventually } from "../lib/testbed.ts";
import { deviceConfig, VirtualDevice } from "../lib/vdevice.ts";

const dev = new VirtualDevice("sd", "vdsd");

beforeAll(async () => {
  await dev.create(deviceConfig(dev.nodeName));
  await dev.boot({ systemd: true });
}, 180_000);
afterAll(() => dev.destroy(), 60_000);

describe("a device with systemd as init (needs root and user-mode Linux: scripts/vdevice)", () => {
  test("systemd is PID 1 on the unified cgroup v2 hierarchy, and containerd runs in its system.slice", async () => {
    await eventually(
      "containerd's unit to be active",
      async () => (await dev.exec("systemctl is-active containerd")).code === 0 || undefined,
      60_000,
      1000,
    );
    const out = await dev.sh(
      "cat /proc/1/comm; stat -f -c %T /sys/fs/cgroup; systemctl is-active containerd; cat /proc/$(pidof containerd)/cgroup",
    );
    expect(out.split("\n").slice(0, 4)).toEqual([
      "systemd",
      "cgroup2fs",
      "active",
      "0::/system.slice/containerd.service",
    ]);
  }, 60_000);

  test("the agent refuses the runtime's systemd driver with one line naming both and the fix; systemd restarts it, no pod is made", async () => {
    const line = `the runtime uses the systemd cgroup driver (containerd's CRI config: runtime "runc" has SystemdCgroup = true) but the agent's cgroupDriver is cgroupfs`;
    await eventually(
      "the agent's second start after its refusal",
      () => /^vdevice: agent start 2 at/m.test(dev.agentLog()) || undefined,
      120_000,
      1000,
    );
    const log = dev.agentLog();
    expect(log).toContain(line);
    expect(log).toMatch(/^vdevice: agent exited with 1 at/m);
    const sandboxes = await dev.sh(
      "crictl --version >/dev/null 2>&1; ctr -n k8s.io containers ls -q | wc -l",
    );
    expect(sandboxes.trim()).toBe("0");
  }, 180_000);
});
