// Resources for real: the compiled agent on this host's cgroup v1 controllers (pod and QoS
// cgroups, memory, cpu and pids limits, admission, the static CPU manager), and the cgroup v2
// driver on the host's cgroup2 mount. Needs root and the test bed (scripts/test starts both).
// Each agent has its own cgroupRoot (/fleetlet-e2e-<node>), removed in afterAll.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createCgroupV2 } from "../../src/agent/cm/index.ts";
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import { cgroupDir, readCgroupFile, removeCgroupRoot } from "../lib/cgroups.ts";
import { eventually } from "../lib/testbed.ts";

const agent = new TestAgent({ args: ["--pod-max-pids", "64"] });
// Process IDs held back for the node's own daemons: kubepods gets the rest as its pids.max.
writeFileSync(join(agent.dir, "config.yaml"), 'kubeReserved: {pid: "1000"}\n');
agent.args.push("--config", join(agent.dir, "config.yaml"));
/** The node's PID count as the kubelet reads it. */
const maxPid = Math.min(
  ...["pid_max", "threads-max"].map((f) => Number(readFileSync(`/proc/sys/kernel/${f}`, "utf8"))),
);
const img = agent.tb.busybox;
const V1 = ["cpu", "cpuacct", "cpuset", "memory", "pids", "blkio", "devices", "freezer"];

function manifest(name: string, containers: string, extra = ""): string {
  return `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
spec:
  terminationGracePeriodSeconds: 1
${extra}  containers:
${containers}`;
}

function container(name: string, command: string[], resources = ""): string {
  return `    - name: ${name}
      image: ${img}
      command: ${JSON.stringify(command)}
${resources ? `      resources: ${resources}\n` : ""}`;
}

const sh = (script: string) => ["sh", "-c", script];
const state = (pod: Pod, name = "main") =>
  pod.status?.containerStatuses?.find((c) => c.name === name);
const running = (p: Pod) => p.status?.phase === "Running" && state(p)?.ready === true;
const containerId = (pod: Pod, name = "main") =>
  (state(pod, name)?.containerID ?? "").replace("containerd://", "");

beforeAll(() => agent.start(), 30_000);
afterAll(() => agent.cleanup(), 60_000);

describe("pod cgroups on cgroup v1 (needs root and the test bed)", () => {
  const kubepods = `${agent.cgroupRoot}/kubepods`;

  test("pod and QoS cgroups exist with kubelet's values while the pod runs, and are gone after", async () => {
    agent.writeManifest(
      "burst.yaml",
      manifest(
        "burst",
        container(
          "main",
          ["sleep", "3600"],
          "{requests: {cpu: 250m, memory: 32Mi}, limits: {cpu: 500m, memory: 64Mi}}",
        ),
      ),
    );
    agent.writeManifest(
      "guar.yaml",
      manifest("guar", container("main", ["sleep", "3600"], "{limits: {cpu: 100m, memory: 16Mi}}")),
    );
    const burst = await agent.waitPod("burst", "Running", running);
    const guar = await agent.waitPod("guar", "Running", running);
    expect(burst.status?.qosClass).toBe("Burstable");
    expect(guar.status?.qosClass).toBe("Guaranteed");
    const bPod = `${kubepods}/burstable/pod${burst.metadata.uid}`;
    const gPod = `${kubepods}/pod${guar.metadata.uid}`;
    expect(readCgroupFile("cpu", bPod, "cpu.shares")).toBe("256");
    expect(readCgroupFile("cpu", bPod, "cpu.cfs_quota_us")).toBe("50000");
    expect(readCgroupFile("cpu", bPod, "cpu.cfs_period_us")).toBe("100000");
    expect(readCgroupFile("memory", bPod, "memory.limit_in_bytes")).toBe(String(64 * 1024 ** 2));
    expect(readCgroupFile("pids", bPod, "pids.max")).toBe("64");
    expect(readCgroupFile("cpu", gPod, "cpu.shares")).toBe("102");
    expect(readCgroupFile("cpu", gPod, "cpu.cfs_quota_us")).toBe("10000");
    expect(readCgroupFile("memory", gPod, "memory.limit_in_bytes")).toBe(String(16 * 1024 ** 2));
    expect(readCgroupFile("cpu", `${kubepods}/burstable`, "cpu.shares")).toBe("256");
    expect(readCgroupFile("cpu", `${kubepods}/besteffort`, "cpu.shares")).toBe("2");
    expect(readCgroupFile("pids", kubepods, "pids.max")).toBe(String(maxPid - 1000));
    // The container runs inside its pod cgroup.
    expect(existsSync(join(cgroupDir("memory", bPod), containerId(burst)))).toBe(true);

    agent.removeManifest("burst.yaml");
    agent.removeManifest("guar.yaml");
    await eventually(
      "both pod cgroups to be removed from every hierarchy",
      () => V1.every((h) => !existsSync(cgroupDir(h, bPod)) && !existsSync(cgroupDir(h, gPod))),
      30_000,
      200,
    );
    await eventually(
      "the burstable shares to drop back to the minimum",
      () => readCgroupFile("cpu", `${kubepods}/burstable`, "cpu.shares") === "2",
      10_000,
    );
  }, 90_000);

  test("a memory limit kills the hog with OOMKilled and the pod restarts it", async () => {
    agent.writeManifest(
      "hog.yaml",
      manifest(
        "hog",
        container(
          "main",
          ["dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=1"],
          "{limits: {memory: 32Mi}}",
        ),
      ),
    );
    const pod = await agent.waitPod(
      "hog",
      "OOMKilled and restarted",
      (p) =>
        state(p)?.lastState?.terminated?.reason === "OOMKilled" &&
        (state(p)?.restartCount ?? 0) >= 1,
      60_000,
    );
    expect(state(pod)?.lastState?.terminated?.exitCode).toBe(137);
    agent.removeManifest("hog.yaml");
  }, 90_000);

  test("a cpu limit throttles the container: nr_throttled > 0 in its cpu.stat", async () => {
    agent.writeManifest(
      "spin.yaml",
      manifest("spin", container("main", sh("while :; do :; done"), "{limits: {cpu: 100m}}")),
    );
    const pod = await agent.waitPod("spin", "Running", running);
    const cg = `${kubepods}/burstable/pod${pod.metadata.uid}/${containerId(pod)}`;
    const throttled = await eventually(
      "the spinning container to be throttled",
      () => {
        const stat = readCgroupFile("cpu", cg, "cpu.stat") ?? "";
        const n = Number(/nr_throttled (\d+)/.exec(stat)?.[1] ?? 0);
        return n > 0 ? n : undefined;
      },
      15_000,
      250,
    );
    expect(throttled).toBeGreaterThan(0);
    expect(readCgroupFile("cpu", cg, "cpu.cfs_quota_us")).toBe("10000");
    agent.removeManifest("spin.yaml");
  }, 60_000);

  test("a pids limit stops a fork bomb inside its pod only", async () => {
    agent.writeManifest(
      "bomb.yaml",
      manifest(
        "bomb",
        container("main", sh("while :; do sleep 600 & done"), "{limits: {cpu: 200m}}"),
      ),
    );
    const bomb = await agent.waitPod("bomb", "Running", (p) => p.status?.phase === "Running");
    const cg = `${kubepods}/burstable/pod${bomb.metadata.uid}`;
    // The bomb's shell exits when a fork is refused and the container restarts, so the count
    // climbs to the limit again and again, each climb a moment (~0.1 s) between back-offs: watch
    // the shell's own complaint, and sample the count every 5 ms for its peak rather than hope a
    // slower sample lands in a climb.
    const bombName = `bomb-${agent.nodeName}`;
    let peak = 0;
    const sampler = setInterval(() => {
      peak = Math.max(peak, Number(readCgroupFile("pids", cg, "pids.current") ?? 0));
    }, 5);
    try {
      await eventually(
        "the bomb to be refused a fork at its pod's pids limit, with the count seen climbing",
        () => {
          const logs = ["", "--previous"].map(
            (flag) => agent.cli(["logs", bombName, ...(flag ? [flag] : [])]).stdout,
          );
          return peak > 8 && logs.some((text) => text.includes("can't fork"));
        },
        45_000,
        200,
      );
    } finally {
      clearInterval(sampler);
    }
    expect(peak).toBeGreaterThan(8);
    expect(peak).toBeLessThanOrEqual(64);
    // Another pod still starts and forks freely.
    agent.writeManifest(
      "calm.yaml",
      manifest(
        "calm",
        container("main", sh("for i in 1 2 3 4 5 6 7 8; do sleep 600 & done; wait")),
      ),
    );
    const calm = await agent.waitPod("calm", "Running", running);
    const calmCg = `${kubepods}/besteffort/pod${calm.metadata.uid}`;
    await eventually(
      "the calm pod to run its 8 children",
      () => Number(readCgroupFile("pids", calmCg, "pids.current") ?? 0) >= 9,
      10_000,
    );
    expect(Number(readCgroupFile("pids", cg, "pids.current"))).toBeLessThanOrEqual(64);
    expect(readCgroupFile("pids", cg, "pids.max")).toBe("64");
    agent.removeManifest("bomb.yaml");
    agent.removeManifest("calm.yaml");
  }, 90_000);

  test("admission rejects pods over allocatable with OutOfcpu / OutOfmemory, others keep running", async () => {
    agent.writeManifest("keep.yaml", manifest("keep", container("main", ["sleep", "3600"])));
    const keep = await agent.waitPod("keep", "Running", running);
    agent.writeManifest(
      "cpuhog.yaml",
      manifest("cpuhog", container("main", ["sleep", "3600"], "{requests: {cpu: '3'}}")),
    );
    agent.writeManifest(
      "memhog.yaml",
      manifest("memhog", container("main", ["sleep", "3600"], "{requests: {memory: 1000Gi}}")),
    );
    const cpu = await agent.waitPod("cpuhog", "Failed", (p) => p.status?.phase === "Failed");
    expect(cpu.status?.reason).toBe("OutOfcpu");
    expect(cpu.status?.message).toMatch(
      /^Pod was rejected: Node didn't have enough resource: cpu, requested: 3000, used: \d+, capacity: 2000$/,
    );
    const mem = await agent.waitPod("memhog", "Failed", (p) => p.status?.phase === "Failed");
    expect(mem.status?.reason).toBe("OutOfmemory");
    expect(mem.status?.message).toContain(
      "Node didn't have enough resource: memory, requested: 1073741824000",
    );
    const after = await agent.waitPod("keep", "Running", running);
    expect(containerId(after)).toBe(containerId(keep));
    for (const f of ["keep.yaml", "cpuhog.yaml", "memhog.yaml"]) agent.removeManifest(f);
  }, 60_000);
});

describe("static CPU manager on a 2-CPU machine (needs root and the test bed)", () => {
  const cpuAgent = new TestAgent({
    args: ["--cpu-manager-policy", "static", "--reserved-cpus", "0"],
  });
  const stateFile = join(cpuAgent.rootDir, "cpu_manager_state");
  beforeAll(() => cpuAgent.start(), 30_000);
  afterAll(() => cpuAgent.cleanup(), 60_000);

  test("a Guaranteed integer-CPU pod gets CPU 1 exclusively, an earlier BestEffort pod moves to CPU 0, kept across an agent restart", async () => {
    // A BestEffort pod started first runs on every CPU, then is moved to the shrunk shared pool.
    cpuAgent.writeManifest("early.yaml", manifest("early", container("main", ["sleep", "3600"])));
    const early = await cpuAgent.waitPod("early", "Running", running);
    const earlyCg = `${cpuAgent.cgroupRoot}/kubepods/besteffort/pod${early.metadata.uid}/${containerId(early)}`;
    expect(readCgroupFile("cpuset", earlyCg, "cpuset.cpus")).toBe("0-1");
    cpuAgent.writeManifest(
      "pinned.yaml",
      manifest(
        "pinned",
        container("main", ["sleep", "3600"], "{limits: {cpu: '1', memory: 32Mi}}"),
      ),
    );
    const pod = await cpuAgent.waitPod("pinned", "Running", running);
    const cg = `${cpuAgent.cgroupRoot}/kubepods/pod${pod.metadata.uid}/${containerId(pod)}`;
    expect(readCgroupFile("cpuset", cg, "cpuset.cpus")).toBe("1");
    const saved = JSON.parse(readFileSync(stateFile, "utf8"));
    expect(saved.policyName).toBe("static");
    expect(saved.defaultCpuSet).toBe("0");
    expect(saved.entries[pod.metadata.uid ?? ""]).toEqual({ main: "1" });
    await eventually(
      "the BestEffort container's cpuset to become the shared pool",
      () => readCgroupFile("cpuset", earlyCg, "cpuset.cpus") === "0",
    );

    await cpuAgent.stop();
    await cpuAgent.start();
    const again = await cpuAgent.waitPod("pinned", "Running", running);
    expect(containerId(again)).toBe(containerId(pod));
    expect(JSON.parse(readFileSync(stateFile, "utf8")).entries).toEqual(saved.entries);
  }, 90_000);

  test("a Guaranteed pod's init container runs on its exclusive CPU, and the app container after it gets the same one", async () => {
    // The pod of the test before holds the one CPU there is to give.
    rmSync(join(cpuAgent.manifests, "pinned.yaml"), { force: true });
    await eventually(
      "the pinned pod's CPU back in the shared pool",
      () => JSON.parse(readFileSync(stateFile, "utf8")).defaultCpuSet === "0-1",
      30_000,
    );
    const res = "{limits: {cpu: '1', memory: 32Mi}}";
    cpuAgent.writeManifest(
      "staged.yaml",
      manifest(
        "staged",
        container("main", ["sleep", "3600"], res),
        `  initContainers:\n${container("setup", sh("grep Cpus_allowed_list /proc/self/status"), res)}`,
      ),
    );
    const pod = await cpuAgent.waitPod("staged", "Running", running);
    const cg = `${cpuAgent.cgroupRoot}/kubepods/pod${pod.metadata.uid}/${containerId(pod)}`;
    expect(readCgroupFile("cpuset", cg, "cpuset.cpus")).toBe("1");
    const saved = JSON.parse(readFileSync(stateFile, "utf8"));
    expect(saved.entries[pod.metadata.uid ?? ""]).toEqual({ setup: "1", main: "1" });
    expect(saved.defaultCpuSet).toBe("0");
    const logs = cpuAgent.cli(["logs", pod.metadata.name ?? "", "-c", "setup"]);
    expect({ ...logs, stdout: logs.stdout.replace(/\s+/g, " ") }).toMatchObject({
      code: 0,
      stdout: "Cpus_allowed_list: 1 ",
    });
    cpuAgent.removeManifest("staged.yaml");
  }, 90_000);

  test("a corrupt checkpoint is refused with a clear error", async () => {
    await cpuAgent.stop();
    writeFileSync(stateFile, '{"policyName":"static","defaultCpuSet":"0-1","checksum":1}');
    const p = Bun.spawnSync(cpuAgent.argv(), { stdout: "pipe", stderr: "pipe", timeout: 20_000 });
    const out = p.stderr.toString() + p.stdout.toString();
    expect(p.exitCode).not.toBe(0);
    expect(out).toContain(`CPU manager checkpoint ${stateFile} is corrupt (checksum mismatch)`);
  }, 30_000);
});

describe("cgroup v2 driver on the host's cgroup2 mount (needs root)", () => {
  const mount = "/sys/fs/cgroup/unified";
  const root = `/fleetlet-e2e-v2-${Math.random().toString(36).slice(2, 8)}`;
  afterAll(() => removeCgroupRoot(root));

  test("creates a cgroup, moves a process in, reads events and PSI, kills via cgroup.kill, removes it", async () => {
    const cg = createCgroupV2({ mountPoint: mount });
    const name = `${root}/kubepods/burstable/pod1`;
    await cg.create(name, { cpuShares: 1024, memory: 64 * 1024 ** 2, pidsLimit: 10 });
    expect(await cg.exists(name)).toBe(true);
    const proc = Bun.spawn(["sleep", "600"]);
    writeFileSync(join(mount, name, "cgroup.procs"), String(proc.pid));
    expect(await cg.pids(`${root}/kubepods`)).toEqual([proc.pid]);
    expect(readCgroupFile("unified", name, "cgroup.events")).toContain("populated 1");
    const stats = await cg.stats(name);
    expect(stats.pressure?.cpu).toBeGreaterThanOrEqual(0);
    expect(stats.pressure?.memory).toBeGreaterThanOrEqual(0);
    await cg.kill(name);
    expect(await proc.exited).not.toBe(0);
    expect(proc.signalCode).toBe("SIGKILL");
    await eventually("the cgroup to be empty", () =>
      readCgroupFile("unified", name, "cgroup.events")?.includes("populated 0"),
    );
    await cg.destroy(`${root}/kubepods`);
    expect(await cg.exists(`${root}/kubepods`)).toBe(false);
  }, 30_000);
});
