// The compiled agent on a cgroup v2 only device (scripts/vdevice: Debian 12 under user-mode
// Linux, containerd with runc and the cgroupfs driver): the kubelet's v2 hierarchy and files for
// pods of each QoS class, node allocatable on kubepods, OOM kills and CPU throttling.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
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
} from "../lib/vdevice.ts";

const dev = new VirtualDevice("cg2", "vdcg2");
const MiB = 1024 ** 2;

const config = deviceConfig(
  dev.nodeName,
  "podPidsLimit: 64\nsystemReserved: {cpu: 100m, memory: 128Mi}\n",
);
const manifest = (name: string, command: string, resources: string) =>
  podNetworkShellManifest(name, IMAGE, command, resources);

const pods: Record<string, string> = {
  guar: manifest("guar", "sleep 3600", "{limits: {cpu: 200m, memory: 32Mi}}"),
  burst: manifest(
    "burst",
    "sleep 3600",
    "{requests: {cpu: 250m, memory: 32Mi}, limits: {cpu: 500m, memory: 64Mi}}",
  ),
  besteffort: manifest("besteffort", "sleep 3600", "{}"),
  // Burstable with no cpu request: the burstable cgroup's weight stays the guar/burst sum.
  hog: manifest("hog", "dd if=/dev/zero of=/dev/null bs=64M count=1", "{limits: {memory: 32Mi}}"),
  spin: manifest("spin", "while :; do :; done", "{limits: {cpu: 100m, memory: 16Mi}}"),
};

const uid = (pod: Pod | undefined) => pod?.metadata.uid ?? "";
let first: Pod[] = [];

beforeAll(async () => {
  await dev.create(config);
  await dev.boot();
  for (const [name, text] of Object.entries(pods)) {
    await dev.writeFile(`/etc/fleetlet/manifests/${name}.yaml`, text, { atomic: true });
  }
  first = await dev.waitPods("the QoS pods and the spinner to run", (ps) =>
    ["guar", "burst", "besteffort", "spin"].every((n) => isRunning(podNamed(ps, n, dev.nodeName))),
  );
}, 240_000);

afterAll(() => dev.destroy(), 60_000);

describe("cgroup v2 on a virtual device (needs root and user-mode Linux: scripts/vdevice)", () => {
  test("pods of each QoS class get the kubelet's v2 cgroups and files, kubepods holds allocatable, and a pod's cgroup goes with it", async () => {
    const node = JSON.parse(await dev.sh("/shared/fleetlet get node -o json")) as {
      status: { capacity: Record<string, string> };
    };
    const capacityKi = Number(node.status.capacity.memory?.replace(/Ki$/, ""));
    // Allocatable for pods: capacity less systemReserved (128Mi, and 100m of the one CPU:
    // 900m = 921 shares = weight 36 by 1 + (shares - 2) * 9999 / 262142).
    expect(await dev.cgroupFile("kubepods/memory.max")).toBe(String(capacityKi * 1024 - 128 * MiB));
    expect(await dev.cgroupFile("kubepods/cpu.weight")).toBe("36");
    // The controllers the pods' limits need are enabled below kubepods (runc adds the others).
    const enabled = (await dev.cgroupFile("kubepods/cgroup.subtree_control"))?.split(" ");
    expect(enabled).toEqual(expect.arrayContaining(["cpu", "memory", "pids"]));

    const guar = podNamed(first, "guar", dev.nodeName);
    const burst = podNamed(first, "burst", dev.nodeName);
    const be = podNamed(first, "besteffort", dev.nodeName);
    expect([guar, burst, be].map((p) => p?.status?.qosClass)).toEqual([
      "Guaranteed",
      "Burstable",
      "BestEffort",
    ]);
    const files = async (dir: string) =>
      (
        await dev.sh(
          `cd /sys/fs/cgroup/${dir} && for f in cpu.weight cpu.max memory.max pids.max; do echo "$f=$(cat $f)"; done`,
        )
      ).trim();
    // Guaranteed directly under kubepods: 200m = 204 shares = weight 8; quota 20 ms per 100 ms.
    expect(await files(`kubepods/pod${uid(guar)}`)).toBe(
      `cpu.weight=8\ncpu.max=20000 100000\nmemory.max=${32 * MiB}\npids.max=64`,
    );
    // Burstable: 250m requested = 256 shares = weight 10; the 500m limit as quota.
    expect(await files(`kubepods/burstable/pod${uid(burst)}`)).toBe(
      `cpu.weight=10\ncpu.max=50000 100000\nmemory.max=${64 * MiB}\npids.max=64`,
    );
    // BestEffort: the minimum 2 shares = weight 1, no limits but the pod pids limit.
    expect(await files(`kubepods/besteffort/pod${uid(be)}`)).toBe(
      "cpu.weight=1\ncpu.max=max 100000\nmemory.max=max\npids.max=64",
    );
    // The QoS cgroups: burstable weighs the Burstable pods' requests (250m), besteffort minimal.
    expect(await dev.cgroupFile("kubepods/burstable/cpu.weight")).toBe("10");
    expect(await dev.cgroupFile("kubepods/besteffort/cpu.weight")).toBe("1");
    // The container runs in a cgroup of its own inside its pod's.
    const id = (containerState(burst)?.containerID ?? "").replace("containerd://", "");
    expect(await dev.cgroupFile(`kubepods/burstable/pod${uid(burst)}/${id}/cgroup.procs`)).toMatch(
      /^\d+/,
    );

    await dev.sh("rm /etc/fleetlet/manifests/burst.yaml /etc/fleetlet/manifests/besteffort.yaml");
    await eventually(
      "the removed pods' cgroups to be gone",
      async () =>
        (
          await dev.exec(
            `ls -d /sys/fs/cgroup/kubepods/*/pod${uid(burst)} /sys/fs/cgroup/kubepods/*/pod${uid(be)}`,
          )
        ).code !== 0,
      60_000,
      1000,
    );
    await eventually(
      "the burstable weight to drop back to the minimum",
      async () => (await dev.cgroupFile("kubepods/burstable/cpu.weight")) === "1",
      30_000,
      1000,
    );
    // The Guaranteed pod is untouched.
    expect(await dev.cgroupFile(`kubepods/pod${uid(guar)}/memory.max`)).toBe(String(32 * MiB));
  }, 180_000);

  test("a container over its memory limit is OOMKilled, as memory.events counts, and restarted", async () => {
    const ps = await dev.waitPods(
      "the hog to be OOMKilled and restarted",
      (p) => {
        const s = containerState(podNamed(p, "hog", dev.nodeName));
        return s?.lastState?.terminated?.reason === "OOMKilled" && (s.restartCount ?? 0) >= 1;
      },
      120_000,
    );
    const hog = podNamed(ps, "hog", dev.nodeName);
    expect(containerState(hog)?.lastState?.terminated?.exitCode).toBe(137);
    // The kernel's count in the pod's cgroup (events of its containers included).
    const events = await dev.cgroupFile(`kubepods/burstable/pod${uid(hog)}/memory.events`);
    expect(Number(/^oom_kill (\d+)$/m.exec(events ?? "")?.[1])).toBeGreaterThanOrEqual(1);
    await dev.sh("rm /etc/fleetlet/manifests/hog.yaml");
  }, 150_000);

  test("a CPU-limited container is throttled, as cpu.stat shows", async () => {
    const spin = podNamed(first, "spin", dev.nodeName);
    const stat = await eventually(
      "the spinner's pod cgroup to be throttled",
      async () => {
        const text = await dev.cgroupFile(`kubepods/pod${uid(spin)}/cpu.stat`);
        const throttled = Number(/^nr_throttled (\d+)$/m.exec(text ?? "")?.[1] ?? 0);
        return throttled > 0 ? text : undefined;
      },
      30_000,
      1000,
    );
    expect(Number(/^throttled_usec (\d+)$/m.exec(stat)?.[1])).toBeGreaterThan(0);
    // 100m of one CPU: the spinner gets about a tenth of it however long it runs.
    const usage = async () =>
      Number(
        /^usage_usec (\d+)$/m.exec(
          (await dev.cgroupFile(`kubepods/pod${uid(spin)}/cpu.stat`)) ?? "",
        )?.[1],
      );
    const [u0, t0] = [await usage(), Date.now()];
    await Bun.sleep(3000);
    const [u1, t1] = [await usage(), Date.now()];
    expect((u1 - u0) / 1000 / (t1 - t0)).toBeLessThan(0.2);
    await dev.sh("rm /etc/fleetlet/manifests/spin.yaml");
  }, 60_000);
});
