// The agent under faults: a stop by SIGTERM, admission beyond maxPods, start calls within
// maxParallelStarts, orphans in the runtime and on disk, bad configuration, and containerd going
// away under it (last: it disturbs the shared containerd). The compiled agent against the real test bed; needs root and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Pod } from "../../src/api/types.ts";
import { type CriClient, createCriClient, type PodSandboxConfig } from "../../src/cri/index.ts";
import { TestAgent } from "../lib/agent.ts";
import { sleeperManifest } from "../lib/manifests.ts";
import { eventually, fleetletBin, startContainerd, stopContainerd } from "../lib/testbed.ts";

const agent = new TestAgent();
const tb = agent.tb;
let cri: CriClient;
const agents: TestAgent[] = [agent];
/** Sandboxes this file created directly through CRI. */
const ownSandboxes: string[] = [];

const sleeper = (name: string) => sleeperManifest(name, tb.busybox);

const statusOf = (pod: Pod) => pod.status?.containerStatuses?.find((c) => c.name === "c");
const running = (p: Pod) =>
  p.status?.phase === "Running" && statusOf(p)?.state?.running !== undefined;

async function containerState(id: string): Promise<string | undefined> {
  const res = await cri.containerStatus({ containerId: id }).catch(() => undefined);
  return res?.status?.state;
}

async function events(
  a: TestAgent,
): Promise<{ reason: string; message: string; involvedObject?: { name?: string } }[]> {
  const res = await a.request("/api/v1/events");
  return ((await res.json()) as { items: { reason: string; message: string }[] }).items;
}

beforeAll(async () => {
  cri = createCriClient({ endpoint: tb.endpoint });
  await cri.pullImage({ image: { image: tb.busybox } });
  agent.writeManifest("a.yaml", sleeper("a"));
  agent.writeManifest("b.yaml", sleeper("b"));
  await agent.start();
}, 60_000);

afterAll(async () => {
  for (const id of ownSandboxes) {
    await cri.stopPodSandbox({ podSandboxId: id }).catch(() => {});
    await cri.removePodSandbox({ podSandboxId: id }).catch(() => {});
  }
  for (const a of agents) await a.cleanup();
  cri.close();
}, 120_000);

describe("fleetlet agent stopped by SIGTERM (needs root and the test bed)", () => {
  test("exits 0 promptly, leaves the containers running, and a new agent adopts them by ID", async () => {
    const before = await Promise.all(["a", "b"].map((n) => agent.waitPod(n, "Running", running)));
    const ids = before.map((p) => (statusOf(p)?.containerID ?? "").replace("containerd://", ""));
    const t0 = Date.now();
    expect(await agent.stop("SIGTERM")).toBe(0);
    expect(Date.now() - t0).toBeLessThan(5000);
    for (const id of ids) expect(await containerState(id)).toBe("CONTAINER_RUNNING");
    await agent.start();
    for (const [i, name] of ["a", "b"].entries()) {
      const after = await agent.waitPod(name, "Running again", running);
      expect(statusOf(after)?.containerID).toBe(statusOf(before[i] as Pod)?.containerID);
      expect(statusOf(after)?.restartCount).toBe(0);
    }
  }, 60_000);
});

describe("a pod's sandbox dying behind the agent's back (needs root and the test bed)", () => {
  test("the next relist sees it, and the pod gets a new sandbox before any periodic sync", async () => {
    // The default sync frequency (1m): only the PLEG's event for the sandbox can act in time.
    const solo = new TestAgent({ args: ["--sync-frequency", "1m"] });
    agents.push(solo);
    solo.writeManifest("sb.yaml", sleeper("sb"));
    await solo.start();
    const before = await solo.waitPod("sb", "Running", running);
    const uid = before.metadata.uid as string;
    const { items } = await cri.listPodSandbox({
      filter: { labelSelector: { "io.kubernetes.pod.uid": uid } },
    });
    expect(items).toHaveLength(1);
    const old = items[0]?.id as string;
    const info = (await cri.podSandboxStatus({ podSandboxId: old, verbose: true })).info;
    const pausePid = JSON.parse(info?.info ?? "{}").pid as number;
    expect(pausePid).toBeGreaterThan(0);
    // Only the sandbox's process dies; the app container keeps running in its own PID namespace.
    process.kill(pausePid, "SIGKILL");
    const after = await solo.waitPod(
      "sb",
      "Running in a new sandbox",
      (p) => running(p) && statusOf(p)?.containerID !== statusOf(before)?.containerID,
      20_000,
    );
    const now = await cri.listPodSandbox({
      filter: { labelSelector: { "io.kubernetes.pod.uid": uid } },
    });
    const ready = now.items.filter((sb) => sb.state === "SANDBOX_READY");
    expect(ready).toHaveLength(1);
    expect(ready[0]?.id).not.toBe(old);
    expect(ready[0]?.metadata?.attempt).toBe(1);
    expect(statusOf(after)?.restartCount).toBe(1);
  }, 60_000);
});

describe("fleetlet agent admission with --max-pods (needs root and the test bed)", () => {
  test("a pod beyond maxPods is Failed with OutOfpods and an event; the first ones keep running", async () => {
    const small = new TestAgent({ args: ["--max-pods", "2"] });
    agents.push(small);
    small.writeManifest("p1.yaml", sleeper("p1"));
    await small.start();
    const p1 = await small.waitPod("p1", "Running", running);
    small.writeManifest("p2.yaml", sleeper("p2"));
    const p2 = await small.waitPod("p2", "Running", running);
    small.writeManifest("p3.yaml", sleeper("p3"));
    const p3 = await small.waitPod("p3", "Failed", (p) => p.status?.phase === "Failed");
    expect(p3.status?.reason).toBe("OutOfpods");
    expect(p3.status?.message).toBe(
      "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2",
    );
    expect(p3.status?.containerStatuses).toBeUndefined();
    expect(small.cli(["get", "pods"]).stdout).toMatch(/p3-\S+\s+0\/1\s+OutOfpods\s/);
    const ev = await eventually("an OutOfpods event", async () =>
      (await events(small)).find((e) => e.reason === "OutOfpods"),
    );
    expect(ev.message).toContain("capacity: 2");
    for (const [name, before] of [
      ["p1", p1],
      ["p2", p2],
    ] as const) {
      const now = (await small.pod(name)) as Pod;
      expect(running(now)).toBe(true);
      expect(statusOf(now)?.containerID).toBe(statusOf(before)?.containerID);
    }
    const sandboxes = await cri.listPodSandbox({});
    expect(sandboxes.items.some((s) => s.metadata?.name === `p3-${small.nodeName}`)).toBe(false);
  }, 60_000);
});

describe("fleetlet agent with --max-parallel-starts (needs root and the test bed)", () => {
  test("pods written at once make one start call at a time with --max-parallel-starts 1", async () => {
    const one = new TestAgent({ args: ["--max-parallel-starts", "1", "--log-level", "debug"] });
    agents.push(one);
    await one.start();
    const names = ["s1", "s2", "s3", "s4"];
    for (const n of names) one.writeManifest(`${n}.yaml`, sleeper(n));
    for (const n of names) await one.waitPod(n, "Running", running);
    // The debug log has each CRI call's end (the line's time) and duration.
    const re =
      /^(\S+) DEBUG CRI call .*\bmethod=(runPodSandbox|createContainer|startContainer) ms=([\d.]+)/gm;
    const calls = [...one.output.matchAll(re)]
      .map((m) => {
        const end = Date.parse(m[1] as string);
        return { method: m[2] as string, start: end - Number(m[3]), end };
      })
      .sort((a, b) => a.start - b.start);
    for (const method of ["runPodSandbox", "createContainer", "startContainer"])
      expect(calls.filter((c) => c.method === method)).toHaveLength(4);
    // No call starts before the one before it has ended (log times are whole milliseconds).
    const overlaps = calls.slice(1).map((c, i) => (calls[i]?.end ?? 0) - c.start);
    expect(Math.max(...overlaps)).toBeLessThanOrEqual(2);
  }, 60_000);
});

function orphanConfig(name: string, labels: Record<string, string>): PodSandboxConfig {
  return {
    metadata: { name, namespace: "default", uid: `uid-${name}`, attempt: 0 },
    hostname: "",
    logDirectory: join(agent.dir, "orphan-logs", name),
    labels,
    linux: { securityContext: { namespaceOptions: { network: "NODE", pid: "CONTAINER" } } },
  };
}

/** A sandbox with one `sleep` container, created directly through CRI. */
async function runOrphan(name: string, labels: Record<string, string>): Promise<string> {
  const config = orphanConfig(name, labels);
  const { podSandboxId } = await cri.runPodSandbox({ config });
  ownSandboxes.push(podSandboxId);
  const { containerId } = await cri.createContainer({
    podSandboxId,
    config: {
      metadata: { name: "c", attempt: 0 },
      image: { image: tb.busybox },
      command: ["sleep", "3600"],
      labels: { ...labels, "io.kubernetes.container.name": "c" },
      logPath: "c/0.log",
    },
    sandboxConfig: config,
  });
  await cri.startContainer({ containerId });
  return podSandboxId;
}

const podLabels = (name: string, node: string) => ({
  "io.fleetlet.managed": "true",
  "io.fleetlet.node": node,
  "io.kubernetes.pod.uid": `uid-${name}`,
  "io.kubernetes.pod.name": name,
  "io.kubernetes.pod.namespace": "default",
});

describe("fleetlet agent housekeeping (needs root and the test bed)", () => {
  test("removes this node's pods that no manifest wants and unknown pod dirs, and nothing else", async () => {
    // Created while the agent is stopped, so that it cannot remove one half-made.
    expect(await agent.stop("SIGTERM")).toBe(0);
    const suffix = Math.random().toString(36).slice(2, 7);
    const ours = await runOrphan(`orphan-${suffix}`, podLabels(`orphan-${suffix}`, agent.nodeName));
    const other = await runOrphan(
      `other-${suffix}`,
      podLabels(`other-${suffix}`, `x${agent.nodeName}`),
    );
    const unlabelled = await runOrphan(`plain-${suffix}`, { "io.fleetlet.e2e": "faults" });
    const strayDir = join(agent.rootDir, "pods", `0000stray${suffix}`);
    mkdirSync(join(strayDir, "volumes"), { recursive: true });
    writeFileSync(join(strayDir, "volumes", "f"), "x");
    await agent.start();
    await eventually(
      "the orphaned sandbox to be removed",
      async () => (await cri.listPodSandbox({ filter: { id: ours } })).items.length === 0,
      30_000,
    );
    await eventually("the stray pod dir to be removed", () => !existsSync(strayDir), 10_000);
    const containers = await cri.listContainers({ filter: { podSandboxId: ours } });
    expect(containers.containers).toHaveLength(0);
    // Two more housekeeping rounds: the other sandboxes are still there and still running.
    await Bun.sleep(2500);
    for (const id of [other, unlabelled]) {
      const { status } = await cri.podSandboxStatus({ podSandboxId: id });
      expect(status?.state).toBe("SANDBOX_READY");
      const list = await cri.listContainers({ filter: { podSandboxId: id } });
      expect(list.containers.map((c) => c.state)).toEqual(["CONTAINER_RUNNING"]);
    }
    // The agent's own pods were not touched.
    await agent.waitPod("a", "Running", running);
  }, 60_000);
});

describe("fleetlet agent with a bad config (needs root and the test bed)", () => {
  const run = (args: string[]) => {
    const p = Bun.spawnSync([fleetletBin, "agent", ...args], { stdout: "pipe", stderr: "pipe" });
    return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
  };
  const cases: [string, string, string[], RegExp][] = [
    ["a config field of the wrong type", "maxPods: lots\n", [], /maxPods/],
    ["an unknown config field", "maxPod: 3\n", [], /maxPod/],
    ["a bad duration in the config", "syncFrequency: soon\n", [], /syncFrequency/],
    ["an unknown flag", "", ["--max-pod", "3"], /--max-pod/],
    ["a flag with a bad value", "", ["--max-pods", "-1"], /--max-pods/],
    ["a flag with a bad duration", "", ["--pleg-relist-period", "fast"], /--pleg-relist-period/],
    [
      "an image GC threshold out of range",
      "imageGCHighThresholdPercent: 101\n",
      [],
      /imageGCHighThresholdPercent: 101 must be between 0 and 100/,
    ],
    [
      "a low image GC threshold above the high one",
      "imageGCHighThresholdPercent: 70\nimageGCLowThresholdPercent: 90\n",
      [],
      /imageGCLowThresholdPercent \(90\) must be less than imageGCHighThresholdPercent \(70\)/,
    ],
    [
      "a log file count below 2",
      "",
      ["--container-log-max-files", "1"],
      /--container-log-max-files: 1 must be at least 2/,
    ],
  ];
  for (const [what, yaml, flags, field] of cases) {
    test(`${what} exits 2 with one line naming it, before anything starts`, () => {
      const file = join(agent.dir, `bad-${Math.random().toString(36).slice(2, 7)}.yaml`);
      writeFileSync(file, yaml);
      const socket = join(agent.dir, "bad-run", "agent.sock");
      const r = run([
        "--config",
        file,
        "--api-socket",
        socket,
        "--root-dir",
        join(agent.dir, "bad-root"),
        "--static-pod-path",
        join(agent.dir, "bad-manifests"),
        "--container-runtime-endpoint",
        tb.endpoint,
        ...flags,
      ]);
      expect(r.code).toBe(2);
      const lines = r.err.trim().split("\n");
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(field);
      expect(r.out).toBe("");
      expect(existsSync(socket)).toBe(false);
      expect(existsSync(join(agent.dir, "bad-root"))).toBe(false);
    });
  }
});

// Last: stops the shared containerd and starts it again.
describe("fleetlet agent across a containerd restart (needs root and the test bed)", () => {
  test("/healthz is 503 naming the runtime while it is down; after, pods are reconciled without restarts", async () => {
    const before = await Promise.all(["a", "b"].map((n) => agent.waitPod(n, "Running", running)));
    expect((await agent.request("/healthz")).status).toBe(200);
    await stopContainerd(tb);
    try {
      const down = await eventually(
        "/healthz to fail",
        async () => {
          const res = await agent.request("/healthz");
          return res.status === 503 ? res.text() : undefined;
        },
        20_000,
      );
      expect(down).toContain("container runtime is down");
    } finally {
      startContainerd();
    }
    await eventually(
      "/healthz to be ok again",
      async () => (await agent.request("/healthz")).status === 200,
      30_000,
    );
    // A few sync rounds after recovery: nothing was restarted or recreated.
    await Bun.sleep(3000);
    for (const [i, name] of ["a", "b"].entries()) {
      const after = await agent.waitPod(name, "Running", running);
      expect(statusOf(after)?.containerID).toBe(statusOf(before[i] as Pod)?.containerID);
      expect(statusOf(after)?.restartCount).toBe(0);
    }
    expect(agent.proc?.exitCode ?? null).toBeNull();
  }, 90_000);
});
