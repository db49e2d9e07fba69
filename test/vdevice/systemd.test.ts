// The guest's systemd flavour (scripts/vdevice build --systemd): a device booted with systemd as
// init, whose containerd runs runc with SystemdCgroup = true, as the Kubernetes docs set it on
// systemd machines. The agent runs with cgroupDriver: systemd: kubepods, the QoS levels and each
// pod are slices systemd owns (made over D-Bus), with the kubelet's names, limits and files; OOM
// and throttling act as on cgroupfs; systemd reloading or re-executing itself keeps the limits
// and the agent's link; an agent set the other way is refused with one line. Needs root and
// user-mode Linux.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Node } from "../../src/api/node.ts";
import type { Pod } from "../../src/api/types.ts";
import { podNetworkShellManifest } from "../lib/manifests.ts";
import { eventually } from "../lib/testbed.ts";
import {
  containerState,
  deviceConfig,
  DEVICE_IMAGE as IMAGE,
  isRunning,
  podNamed,
  VirtualDevice,
  waitOomKilled,
} from "../lib/vdevice.ts";

const dev = new VirtualDevice("sd", "vdsd");
const MiB = 1024 ** 2;
const config = deviceConfig(
  dev.nodeName,
  "cgroupDriver: systemd\npodPidsLimit: 64\nsystemReserved: {cpu: 100m, memory: 128Mi}\n" +
    // The guest's root is read-only but for /var/lib/fleetlet, as on many devices.
    "devicePluginPath: /var/lib/fleetlet/device-plugins\n",
);
const manifest = (name: string, command: string, resources: string) =>
  podNetworkShellManifest(name, IMAGE, command, resources);
const pods: Record<string, string> = {
  burst: manifest(
    "burst",
    "sleep 3600",
    "{requests: {cpu: 250m, memory: 32Mi}, limits: {cpu: 500m, memory: 64Mi}}",
  ),
  besteffort: manifest("besteffort", "sleep 3600", "{}"),
  hog: manifest("hog", "dd if=/dev/zero of=/dev/null bs=64M count=1", "{limits: {memory: 32Mi}}"),
  spin: manifest("spin", "while :; do :; done", "{limits: {cpu: 100m, memory: 16Mi}}"),
};

const uid = (pod: Pod | undefined) => pod?.metadata.uid ?? "";
/** The folder of a pod's slice below /sys/fs/cgroup ("" qos: Guaranteed). */
const podSlice = (qos: "burstable" | "besteffort" | "", pod: Pod | undefined) => {
  const unit = `kubepods${qos ? `-${qos}` : ""}-pod${uid(pod).replaceAll("-", "_")}.slice`;
  return qos ? `kubepods.slice/kubepods-${qos}.slice/${unit}` : `kubepods.slice/${unit}`;
};
const unitOf = (dir: string) => dir.slice(dir.lastIndexOf("/") + 1);
/** systemctl show's values of `unit`, as KEY=VALUE lines in name order. */
const show = async (unit: string, props: string[]) =>
  (await dev.sh(`systemctl show ${unit} ${props.map((p) => `-p ${p}`).join(" ")}`))
    .trim()
    .split("\n")
    .sort()
    .join("\n");

let first: Pod[] = [];

beforeAll(async () => {
  await dev.create(config);
  await dev.boot({ systemd: true });
  for (const [name, text] of Object.entries(pods)) {
    await dev.writeFile(`/etc/fleetlet/manifests/${name}.yaml`, text, { atomic: true });
  }
  first = await dev.waitPods(
    "the QoS pods and the spinner to run",
    (ps) => ["burst", "besteffort", "spin"].every((n) => isRunning(podNamed(ps, n, dev.nodeName))),
    240_000,
  );
}, 420_000);
afterAll(() => dev.destroy(), 60_000);

describe("a device with systemd as init and the systemd cgroup driver (needs root and user-mode Linux: scripts/vdevice)", () => {
  test("systemd is PID 1 on the unified cgroup v2 hierarchy, containerd runs in its system.slice, and the agent reached systemd over its private socket", async () => {
    const out = await dev.sh(
      "cat /proc/1/comm; stat -f -c %T /sys/fs/cgroup; systemctl is-active containerd; cat /proc/$(pidof containerd)/cgroup",
    );
    expect(out.split("\n").slice(0, 4)).toEqual([
      "systemd",
      "cgroup2fs",
      "active",
      "0::/system.slice/containerd.service",
    ]);
    expect(dev.agentLog()).toMatch(
      /connected to systemd [^\n]*version="?25\d[^ ]* via="private socket"/,
    );
    expect(dev.agentLog()).toMatch(/container manager started [^\n]*cgroupDriver=systemd/);
  }, 60_000);

  test("kubepods.slice holds allocatable as unit properties and files; the QoS slices weigh their pods", async () => {
    const node = JSON.parse(await dev.sh("/shared/fleetlet get node -o json")) as Node;
    const capacityKi = Number(node.status.capacity?.memory?.replace(/Ki$/, ""));
    const allocatable = capacityKi * 1024 - 128 * MiB;
    expect(await show("kubepods.slice", ["ActiveState", "MemoryMax", "CPUWeight"])).toBe(
      `ActiveState=active\nCPUWeight=36\nMemoryMax=${allocatable}`,
    );
    expect(await dev.cgroupFile("kubepods.slice/memory.max")).toBe(String(allocatable));
    expect(await dev.cgroupFile("kubepods.slice/cpu.weight")).toBe("36");
    const enabled = (await dev.cgroupFile("kubepods.slice/cgroup.subtree_control"))?.split(" ");
    expect(enabled).toEqual(expect.arrayContaining(["cpu", "memory", "pids"]));
    // 250m requested by the one Burstable pod = 256 shares = weight 10; BestEffort the minimum.
    expect(await dev.cgroupFile("kubepods.slice/kubepods-burstable.slice/cpu.weight")).toBe("10");
    expect(await dev.cgroupFile("kubepods.slice/kubepods-besteffort.slice/cpu.weight")).toBe("1");
    expect(await show("kubepods-besteffort.slice", ["ActiveState"])).toBe("ActiveState=active");
    // The eviction manager reads allocatableMemory.available from kubepods.slice: a wrong path
    // would read no limit, and evict every pod.
    expect(dev.agentLog()).not.toMatch(/cannot read an eviction signal|thresholds have been met/);
  }, 60_000);

  test("a Burstable pod's slice has the kubelet's name, limits as properties and files, and its container in runc's scope", async () => {
    const burst = podNamed(first, "burst", dev.nodeName);
    const dir = podSlice("burstable", burst);
    const props = await show(unitOf(dir), ["MemoryMax", "CPUQuotaPerSecUSec", "TasksMax"]);
    expect(props).toBe(`CPUQuotaPerSecUSec=500ms\nMemoryMax=${64 * MiB}\nTasksMax=64`);
    const files = await dev.sh(
      `cd /sys/fs/cgroup/${dir} && for f in cpu.weight cpu.max memory.max pids.max; do echo "$f=$(cat $f)"; done`,
    );
    expect(files.trim()).toBe(
      `cpu.weight=10\ncpu.max=50000 100000\nmemory.max=${64 * MiB}\npids.max=64`,
    );
    const id = (containerState(burst)?.containerID ?? "").replace("containerd://", "");
    expect(await dev.cgroupFile(`${dir}/cri-containerd-${id}.scope/cgroup.procs`)).toMatch(/^\d+/);
  }, 60_000);

  test("a container over its memory limit is OOMKilled, as its pod slice's memory.events counts", async () => {
    const ps = await waitOomKilled(dev, "hog");
    const hog = podNamed(ps, "hog", dev.nodeName);
    const events = await dev.cgroupFile(`${podSlice("burstable", hog)}/memory.events`);
    expect(Number(/^oom_kill (\d+)$/m.exec(events ?? "")?.[1])).toBeGreaterThanOrEqual(1);
    await dev.sh("rm /etc/fleetlet/manifests/hog.yaml");
  }, 150_000);

  test("a CPU-limited container is throttled in its Guaranteed pod's slice", async () => {
    const spin = podNamed(first, "spin", dev.nodeName);
    const dir = podSlice("", spin);
    expect(await show(unitOf(dir), ["CPUQuotaPerSecUSec"])).toBe("CPUQuotaPerSecUSec=100ms");
    await eventually(
      "the spinner's pod slice to be throttled",
      async () => {
        const text = await dev.cgroupFile(`${dir}/cpu.stat`);
        return Number(/^nr_throttled (\d+)$/m.exec(text ?? "")?.[1] ?? 0) > 0 || undefined;
      },
      30_000,
      1000,
    );
  }, 60_000);

  test("systemd reloading and re-executing itself keeps the limits, and the agent's next change reaches it", async () => {
    const burst = podNamed(first, "burst", dev.nodeName);
    const dir = podSlice("burstable", burst);
    await dev.sh("systemctl daemon-reload");
    expect(await dev.cgroupFile(`${dir}/memory.max`)).toBe(String(64 * MiB));
    expect(await dev.cgroupFile(`${dir}/cpu.max`)).toBe("50000 100000");
    await dev.sh("systemctl daemon-reexec");
    expect(await dev.cgroupFile(`${dir}/memory.max`)).toBe(String(64 * MiB));
    // A pod removed now: its slice is stopped over a new connection.
    await dev.sh("rm /etc/fleetlet/manifests/burst.yaml");
    await eventually(
      "the removed pod's slice to be gone",
      async () =>
        (await dev.exec(`test -e /sys/fs/cgroup/${dir}`)).code !== 0 &&
        (await show(unitOf(dir), ["LoadState"])) === "LoadState=not-found",
      90_000,
      1000,
    );
    expect(dev.agentLog()).toContain("connection to systemd lost; the next call connects again");
    await eventually(
      "the burstable weight to drop back to the minimum",
      async () =>
        (await dev.cgroupFile("kubepods.slice/kubepods-burstable.slice/cpu.weight")) === "1" ||
        undefined,
      30_000,
      1000,
    );
  }, 150_000);

  test("the agent restarted takes its slices over: no container restarts", async () => {
    const before = podNamed(first, "besteffort", dev.nodeName);
    await dev.sh("systemctl restart fleetlet-agent");
    await eventually(
      "the agent's second start",
      () => /^vdevice: agent start 2 at/m.test(dev.agentLog()) || undefined,
      60_000,
      1000,
    );
    const ps = await dev.waitPods("the agent to report its pods again", (p) => {
      const be = podNamed(p, "besteffort", dev.nodeName);
      return isRunning(be) && /agent start 2[\s\S]*container manager started/.test(dev.agentLog());
    });
    const after = containerState(podNamed(ps, "besteffort", dev.nodeName));
    expect(after?.containerID).toBe(containerState(before)?.containerID);
    expect(after?.restartCount).toBe(0);
    expect(await show(unitOf(podSlice("besteffort", before)), ["ActiveState"])).toBe(
      "ActiveState=active",
    );
  }, 150_000);

  test("an agent set to cgroupfs under this runtime is refused with one line naming both and the fix", async () => {
    const line = `the runtime uses the systemd cgroup driver (containerd's CRI config: runtime "runc" has SystemdCgroup = true) but the agent's cgroupDriver is cgroupfs: set cgroupDriver: "systemd" in the agent config`;
    await dev.writeFile(
      "/etc/fleetlet/config.yaml",
      config.replace("cgroupDriver: systemd", "cgroupDriver: cgroupfs"),
      { atomic: true },
    );
    await dev.sh("systemctl restart fleetlet-agent");
    await eventually(
      "the refusal",
      () => /^vdevice: agent exited with 1 at/m.test(dev.agentLog()) || undefined,
      60_000,
      1000,
    );
    expect(dev.agentLog()).toContain(line);
  }, 90_000);
});
