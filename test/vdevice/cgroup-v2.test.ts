// The compiled agent on a cgroup v2 only device (scripts/vdevice: Debian 12 under user-mode
// Linux, containerd with runc and the cgroupfs driver): the kubelet's v2 hierarchy and files for
// pods of each QoS class, node allocatable on kubepods, OOM kills, CPU throttling, and the
// eviction manager's memory signal read from the v2 files.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { nodeMemory } from "../../src/agent/eviction/observe.ts";
import type { Node } from "../../src/api/node.ts";
import { memoryToBytes } from "../../src/api/quantity.ts";
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

const dev = new VirtualDevice("cg2", "vdcg2");
const MiB = 1024 ** 2;
/** The eviction test's evictionPressureTransitionPeriod, in seconds. */
const TRANSITION_S = 10;

/** Host devices: two nodes of a major no driver has (240), made by a hook at every boot. */
const SERIAL = "fleetlet.io/serial";
const config = deviceConfig(
  dev.nodeName,
  'podPidsLimit: 64\nsystemReserved: {cpu: 100m, memory: 128Mi, pid: "1000"}\n' +
    // The guest's root is read-only but for /var/lib/fleetlet, as on many devices.
    `devicePluginPath: /var/lib/fleetlet/device-plugins\nhostDevices: [{name: ${SERIAL}, paths: ["/dev/ttyTEST*"]}]\n`,
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
  // Opens the node it was given, then makes the other one and opens it.
  serial: manifest(
    "serial",
    "cat /dev/ttyTEST0 2>&1; ls /dev/ttyTEST1 2>&1; mknod /tmp/other c 240 1 && cat /tmp/other 2>&1; sleep 3600",
    `{limits: {${SERIAL}: 1}}`,
  ),
};

const uid = (pod: Pod | undefined) => pod?.metadata.uid ?? "";

/** The agent's node (the CLI inside the guest); undefined while its API does not answer. */
async function deviceNode(): Promise<Node | undefined> {
  const r = await dev.exec("/shared/fleetlet get node -o json");
  return r.code === 0 ? (JSON.parse(r.out) as Node) : undefined;
}

const memoryPressure = (node: Node | undefined) =>
  node?.status.conditions?.find((c) => c.type === "MemoryPressure");
let first: Pod[] = [];

beforeAll(async () => {
  await dev.create(config);
  dev.setHook("pre-boot", "mknod /dev/ttyTEST0 c 240 0 && mknod /dev/ttyTEST1 c 240 1");
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
    // And the guest's PID count (the smaller of pid_max and threads-max) less the 1000 reserved.
    const [pidMax, threadsMax] = (
      await dev.sh("cat /proc/sys/kernel/pid_max /proc/sys/kernel/threads-max")
    )
      .trim()
      .split(/\s+/)
      .map(Number);
    expect(await dev.cgroupFile("kubepods/pids.max")).toBe(
      String(Math.min(pidMax ?? 0, threadsMax ?? 0) - 1000),
    );
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

  test("host devices: a pod gets the node it asked for, and runc's device program refuses it every other", async () => {
    const node = JSON.parse(await dev.sh("/shared/fleetlet get node -o json")) as Node;
    expect(node.status.capacity?.[SERIAL]).toBe("2");
    // Started last of six on a slow guest: waited for on its own.
    const pods = await dev.waitPods(
      "the serial pod to run",
      (ps) => isRunning(podNamed(ps, "serial", dev.nodeName)),
      180_000,
    );
    const pod = podNamed(pods, "serial", dev.nodeName);
    expect(containerState(pod)?.allocatedResourcesStatus).toEqual([
      { name: SERIAL, resources: [{ resourceID: "/dev/ttyTEST0", health: "Healthy" }] },
    ]);
    const out = await eventually("the serial pod's output", async () => {
      const r = await dev.exec(`/shared/fleetlet logs ${pod?.metadata.name}`);
      if (!r.out.includes("/tmp/other")) throw new Error(`output so far: ${JSON.stringify(r.out)}`);
      return r.out;
    });
    // On cgroup v2 the device cgroup is an eBPF program runc attaches to the container's cgroup.
    expect(out).toContain("can't open '/dev/ttyTEST0': No such device or address");
    expect(out).toContain("/dev/ttyTEST1: No such file or directory");
    expect(out).toContain("can't open '/tmp/other': Operation not permitted");
  }, 240_000);

  test("a container over its memory limit is OOMKilled, as memory.events counts, and restarted", async () => {
    const ps = await waitOomKilled(dev, "hog");
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

  test("memory.available from the v2 files: a pod allocating past a threshold set below what the guest has is evicted with the kubelet's message, and MemoryPressure goes True, then False after the transition period", async () => {
    // What the guest has now, read as the agent reads it on cgroup v2 (/proc/meminfo and the
    // root cgroup's memory.stat, copied out through the shared folder).
    mkdirSync(join(dev.shared, "mem"), { recursive: true });
    await dev.sh(
      "mkdir -p /shared/mem/root && cat /proc/meminfo > /shared/mem/meminfo && cat /sys/fs/cgroup/memory.stat > /shared/mem/root/memory.stat",
    );
    const root = { version: 2 as const, dir: join(dev.shared, "mem/root") };
    const available = nodeMemory(root, join(dev.shared, "mem/meminfo")).available;
    // 120 MiB below what the guest has; the pod takes 250 MiB (and leaves the guest hundreds).
    const threshold = Math.floor(available / MiB) - 120;
    expect(threshold).toBeGreaterThan(250);
    await dev.writeFile(
      "/etc/fleetlet/config.yaml",
      `${config}evictionHard: {memory.available: ${threshold}Mi}
evictionMonitoringPeriod: 1s
evictionPressureTransitionPeriod: ${TRANSITION_S}s
`,
      { atomic: true },
    );
    // The device's init starts the agent again with its new config; the pods keep running.
    await dev.sh("kill $(pidof fleetlet)");
    const node = await eventually(
      "the agent to be back with its new config",
      async () => (/vdevice: agent start 2 /.test(dev.agentLog()) ? await deviceNode() : undefined),
      60_000,
      1000,
    );
    const calm = memoryPressure(node);
    expect(calm?.status).toBe("False");
    const guar = podNamed(first, "guar", dev.nodeName);

    // dd holds its 250 MiB buffer while its write to the never-read pipe blocks.
    await dev.writeFile(
      "/etc/fleetlet/manifests/greedy.yaml",
      manifest(
        "greedy",
        "dd if=/dev/zero bs=250M count=1 | sleep 3600",
        "{requests: {memory: 16Mi}, limits: {memory: 320Mi}}",
      ),
      { atomic: true },
    );
    const ps = await dev.waitPods(
      "the greedy pod to be evicted and stopped",
      (p) => {
        const g = podNamed(p, "greedy", dev.nodeName);
        return g?.status?.reason === "Evicted" && containerState(g)?.state.terminated !== undefined;
      },
      120_000,
    );
    const greedy = podNamed(ps, "greedy", dev.nodeName);
    const message = greedy?.status?.message ?? "";
    expect(greedy?.status?.phase).toBe("Failed");
    expect(message).toMatch(
      new RegExp(
        `^The node was low on resource: memory\\. Threshold quantity: ${threshold}Mi, available: \\d+(Ki|Mi)?\\. Container main was using \\d+(Ki|Mi)?, request is 16Mi, has larger consumption of memory\\. $`,
      ),
    );
    // As the kubelet prints a quantity: Mi when the bytes are a whole number of MiB, else Ki.
    const reported = /available: (\d+(?:Ki|Mi)?)\./.exec(message)?.[1] ?? "";
    expect(memoryToBytes(reported)).toBeLessThan(threshold * MiB);
    const disruption = greedy?.status?.conditions?.find((c) => c.type === "DisruptionTarget");
    expect(disruption).toMatchObject({ status: "True", reason: "TerminationByKubelet", message });
    // MemoryPressure went True (read once the pod is stopped it may be False already: a busy
    // guest can take longer than the transition period to stop it).
    expect(dev.agentLog()).toMatch(
      /node pressure conditions changed[^\n]*conditions=MemoryPressure/,
    );
    const relieved = await eventually(
      "MemoryPressure to be False again",
      async () => {
        const c = memoryPressure(await deviceNode());
        return c?.status === "False" ? c : undefined;
      },
      60_000,
      1000,
    );
    const seconds = (t: string | undefined) => Date.parse(t ?? "") / 1000;
    // False again after being True: the condition changed since it was read before the pod.
    expect(seconds(relieved.lastTransitionTime)).toBeGreaterThan(seconds(calm?.lastTransitionTime));
    // It held for the transition period after the threshold was last met.
    // Times in whole seconds: the transition period, less one for the rounding.
    expect(
      seconds(relieved.lastTransitionTime) - seconds(disruption?.lastTransitionTime),
    ).toBeGreaterThanOrEqual(TRANSITION_S - 1);
    // The Guaranteed pod, far below its request, was not touched.
    const after = podNamed(await dev.pods(), "guar", dev.nodeName);
    expect(isRunning(after)).toBe(true);
    expect(containerState(after)?.restartCount).toBe(0);
    expect(containerState(after)?.containerID).toBe(containerState(guar)?.containerID);
    await dev.sh("rm /etc/fleetlet/manifests/greedy.yaml");
  }, 240_000);
});
