// The runtime manager against the real containerd of the test bed: pods with host and bridge
// networking run, are rebuilt from the runtime, stopped with their preStop hooks and removed.
// Needs root and the test bed (scripts/testbed start).

import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { createRuntimeManager, type RuntimeManager } from "../../src/agent/kuberuntime/index.ts";
import {
  createSystemMounter,
  createVolumeManager,
  type VolumeManager,
} from "../../src/agent/volumes/index.ts";
import type { Container, Pod } from "../../src/api/types.ts";
import { type CriClient, createCriClient } from "../../src/cri/index.ts";
import { realClock } from "../../src/util/clock.ts";
import { nullLogger } from "../../src/util/log.ts";
import { makeContainer, makePod } from "../lib/builders.ts";
import { eventually, inSubnet, loadTestbed, type Testbed, uniqueName } from "../lib/testbed.ts";

setDefaultTimeout(90_000);

let tb: Testbed;
let cri: CriClient;
let rm: RuntimeManager;
let volumes: VolumeManager;
let dir: string;
const events: string[] = [];
const uids: string[] = [];

beforeAll(() => {
  tb = loadTestbed();
  cri = createCriClient({ endpoint: tb.endpoint });
  dir = mkdtempSync(join(tmpdir(), "fleetlet-e2e-kuberuntime-"));
  volumes = createVolumeManager({
    rootDir: join(dir, "root"),
    nodeName: "e2e-node",
    objects: { configMap: () => undefined, secret: () => undefined },
    allocatable: () => ({ cpu: 2000, memory: totalmem(), ephemeralStorage: 0 }),
    clock: realClock,
    logger: nullLogger,
    recorder: (pod, type, reason, message) =>
      events.push(`${pod.metadata.name} ${type} ${reason}: ${message}`),
    mounter: createSystemMounter(),
  });
  rm = createRuntimeManager({
    volumes,
    cri,
    clock: realClock,
    logger: nullLogger,
    recorder: (pod, type, reason, message) =>
      events.push(`${pod.metadata.name} ${type} ${reason}: ${message}`),
    podLogsDir: join(dir, "logs"),
    rootDir: join(dir, "root"),
    nodeName: "e2e-node",
    nodeIP: () => "127.0.0.1",
    nodeMemoryBytes: totalmem(),
    crashLoopBackOff: { initialMs: 10_000, maxMs: 300_000 },
    imagePullBackOff: { initialMs: 10_000, maxMs: 300_000 },
    runtimeRequestTimeoutMs: 60_000,
  });
});

afterAll(async () => {
  for (const uid of uids) {
    const sandboxes = await cri
      .listPodSandbox({ filter: { labelSelector: { "io.kubernetes.pod.uid": uid } } })
      .catch(() => ({ items: [] }));
    for (const sb of sandboxes.items) {
      await cri.stopPodSandbox({ podSandboxId: sb.id }).catch(() => undefined);
      await cri.removePodSandbox({ podSandboxId: sb.id }).catch(() => undefined);
    }
  }
  cri?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function testPod(prefix: string, containers: Container[], spec: Partial<Pod["spec"]> = {}): Pod {
  const name = uniqueName(prefix);
  const uid = crypto.randomUUID();
  uids.push(uid);
  return makePod({
    name,
    uid,
    containers,
    spec: { nodeName: "e2e-node", terminationGracePeriodSeconds: 2, ...spec },
  });
}

const busybox = (o: Partial<Container>) =>
  makeContainer({ image: tb.busybox, imagePullPolicy: "IfNotPresent", ...o });

async function statusOf(pod: Pod) {
  return rm.getPodStatus(pod.metadata.uid ?? "", pod.metadata.name, "default");
}

/** Syncs the pod once; the status read after it with the fewest calls must equal a full read. */
async function syncOnce(pod: Pod) {
  expect((await volumes.mountPod(pod, false)).failed).toEqual([]);
  const before = await statusOf(pod);
  const result = await rm.syncPod(pod, before);
  expect(result.errors).toEqual([]);
  const after = await rm.getPodStatusAfter(before, result.changes);
  expect({ ...after, timestamp: 0 }).toEqual({ ...(await statusOf(pod)), timestamp: 0 });
  return result;
}

async function killAndRemove(pod: Pod) {
  const running = (await rm.getPods()).find((p) => p.uid === pod.metadata.uid);
  expect(running).toBeDefined();
  if (!running) return;
  await rm.killPod(pod, running);
  await rm.removePod(running);
  const left = await cri.listContainers({
    filter: { labelSelector: { "io.kubernetes.pod.uid": pod.metadata.uid ?? "" } },
  });
  const sandboxes = await cri.listPodSandbox({
    filter: { labelSelector: { "io.kubernetes.pod.uid": pod.metadata.uid ?? "" } },
  });
  expect(left.containers).toEqual([]);
  expect(sandboxes.items).toEqual([]);
  expect(existsSync(join(dir, "logs", `default_${pod.metadata.name}_${pod.metadata.uid}`))).toBe(
    false,
  );
}

describe("runtime manager on containerd", () => {
  test("runs a host-network pod and rebuilds it from the runtime", async () => {
    const pod = testPod("host", [busybox({ name: "web", command: ["sleep", "3600"] })], {
      hostNetwork: true,
    });
    await syncOnce(pod);
    const status = await statusOf(pod);
    expect(status.sandboxes).toMatchObject([{ state: "ready", attempt: 0, hostNetwork: true }]);
    expect(status.ips).toEqual([]);
    expect(status.containers).toMatchObject([{ name: "web", state: "running", restartCount: 0 }]);
    expect(status.containers[0]?.hash).toMatch(/^[0-9a-f]+$/);
    const again = await rm.syncPod(pod, status);
    expect(again).toEqual({
      errors: [],
      waiting: new Map(),
      changes: { sandboxes: [], containers: [] },
    });
    expect((await statusOf(pod)).containers).toHaveLength(1);
    await killAndRemove(pod);
  });

  test("runs a bridge-network pod, and its preStop hook writes to a hostPath volume before it stops", async () => {
    const data = join(dir, "data");
    const pod = testPod(
      "bridge",
      [
        busybox({
          name: "web",
          command: ["sh", "-c", "echo started; exec sleep 3600"],
          volumeMounts: [{ name: "data", mountPath: "/data" }],
          lifecycle: { preStop: { exec: { command: ["sh", "-c", "echo bye > /data/prestop"] } } },
        }),
      ],
      { volumes: [{ name: "data", hostPath: { path: data, type: "DirectoryOrCreate" } }] },
    );
    await syncOnce(pod);
    const status = await statusOf(pod);
    expect(status.sandboxes[0]?.hostNetwork).toBe(false);
    expect(inSubnet(status.ips[0] ?? "", tb.cniSubnet)).toBe(true);
    expect(status.containers).toMatchObject([{ name: "web", state: "running", restartCount: 0 }]);
    const log = join(
      dir,
      "logs",
      `default_${pod.metadata.name}_${pod.metadata.uid}`,
      "web",
      "0.log",
    );
    await eventually(
      "the container's log",
      () => existsSync(log) && readFileSync(log, "utf8").includes("started"),
    );
    await killAndRemove(pod);
    expect(readFileSync(join(data, "prestop"), "utf8")).toBe("bye\n");
  });

  test("reports a container that exited 3 as exited with reason Error and its termination message", async () => {
    const pod = testPod(
      "exit",
      [
        busybox({
          name: "job",
          command: ["sh", "-c", 'printf %s "$POD" > /dev/termination-log; exit 3'],
          env: [{ name: "POD", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } }],
        }),
      ],
      { restartPolicy: "Never" },
    );
    await syncOnce(pod);
    const exited = await eventually("the container to exit", async () => {
      const c = (await statusOf(pod)).containers[0];
      return c?.state === "exited" ? c : undefined;
    });
    expect(exited).toMatchObject({
      name: "job",
      exitCode: 3,
      reason: "Error",
      message: pod.metadata.name,
    });
    await syncOnce(pod);
    const after = await statusOf(pod);
    expect(after.containers).toHaveLength(1);
    expect(after.sandboxes[0]?.state).toBe("notready");
    await killAndRemove(pod);
  });

  test("applies capabilities, no_new_privs and limits, and restarts an exited container as attempt 1", async () => {
    const pod = testPod("sec", [
      busybox({
        name: "web",
        command: [
          "sh",
          "-c",
          "grep CapBnd /proc/self/status; cat /sys/fs/cgroup/memory/memory.limit_in_bytes; exec sleep 3600",
        ],
        securityContext: {
          capabilities: { drop: ["ALL"], add: ["NET_ADMIN"] },
          allowPrivilegeEscalation: false,
        },
        resources: { limits: { cpu: "500m", memory: "64Mi" } },
      }),
    ]);
    await syncOnce(pod);
    const first = (await statusOf(pod)).containers[0];
    const exec = await cri.execSync({
      containerId: first?.id ?? "",
      cmd: [
        "sh",
        "-c",
        "grep -E 'CapBnd|NoNewPrivs' /proc/self/status; cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us",
      ],
      timeout: 10,
    });
    const out = new TextDecoder().decode(exec.stdout);
    expect(out).toMatch(/CapBnd:\s+0000000000001000/);
    expect(out).toMatch(/NoNewPrivs:\s+1/);
    expect(out).toContain(`${64 * 1024 * 1024}\n50000`);
    await cri.stopContainer({ containerId: first?.id ?? "", timeout: 0 });
    await syncOnce(pod);
    const status = await statusOf(pod);
    expect(status.containers.map((c) => [c.state, c.restartCount])).toEqual([
      ["running", 1],
      ["exited", 0],
    ]);
    await killAndRemove(pod);
  });
});
