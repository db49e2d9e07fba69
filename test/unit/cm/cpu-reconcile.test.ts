import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type CpuTopology,
  createContainerManager,
  createCpuManager,
  createCpuReconciler,
  planCpusetUpdates,
  type RuntimePodContainers,
} from "../../../src/agent/cm/index.ts";
import type { Pod } from "../../../src/api/types.ts";
import {
  createFakeRuntime,
  type FakeRuntime,
  type PodSandboxConfig,
} from "../../../src/cri/index.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";

const IMAGE = "busybox:1.36";

const burstable = makePod({
  name: "shared",
  containers: [makeContainer({ name: "app", resources: { requests: { cpu: "100m" } } })],
});
const guaranteed = makePod({
  name: "exclusive",
  containers: [
    makeContainer({ name: "main", resources: { limits: { cpu: "1", memory: "64Mi" } } }),
  ],
});

describe("planCpusetUpdates()", () => {
  const running: RuntimePodContainers[] = [
    {
      uid: "uid-default-shared",
      containers: [
        { id: "c1", name: "app", state: "running" },
        { id: "c0", name: "app", state: "exited" },
      ],
    },
    { uid: "uid-orphan", containers: [{ id: "c9", name: "app", state: "running" }] },
  ];
  const shared = () => "0";

  test("updates running containers of active pods whose last written cpuset differs", () => {
    expect(planCpusetUpdates([burstable], running, shared, new Map([["c1", "0-1"]]))).toEqual([
      { containerId: "c1", podUid: "uid-default-shared", containerName: "app", cpuset: "0" },
    ]);
  });

  test("updates a container never written to, once", () => {
    expect(planCpusetUpdates([burstable], running, shared, new Map())).toHaveLength(1);
    expect(planCpusetUpdates([burstable], running, shared, new Map([["c1", "0"]]))).toEqual([]);
  });

  test("skips exited containers, pods that are not active, unknown container names and an empty cpuset", () => {
    const renamed: RuntimePodContainers[] = [
      { uid: "uid-default-shared", containers: [{ id: "c2", name: "gone", state: "running" }] },
    ];
    expect(planCpusetUpdates([], running, shared, new Map())).toEqual([]);
    expect(planCpusetUpdates([burstable], renamed, shared, new Map())).toEqual([]);
    expect(planCpusetUpdates([burstable], running, () => "", new Map())).toEqual([]);
  });

  test("updates a running sidecar (an init container) like an app container", () => {
    const withSidecar = makePod({
      name: "shared",
      initContainers: [makeContainer({ name: "proxy", restartPolicy: "Always" })],
      containers: [makeContainer({ name: "app" })],
    });
    const both: RuntimePodContainers[] = [
      {
        uid: "uid-default-shared",
        containers: [
          { id: "s1", name: "proxy", state: "running" },
          { id: "c1", name: "app", state: "running" },
        ],
      },
    ];
    expect(
      planCpusetUpdates([withSidecar], both, shared, new Map()).map((u) => u.containerName),
    ).toEqual(["proxy", "app"]);
  });
});

/** Runs the pod's containers in the fake runtime with the given cpuset. */
async function runPod(cri: FakeRuntime, pod: Pod, cpusetCpus: string): Promise<void> {
  const uid = pod.metadata.uid ?? "";
  const sandboxConfig: PodSandboxConfig = {
    metadata: { name: pod.metadata.name ?? "", namespace: "default", uid, attempt: 0 },
  };
  const { podSandboxId } = await cri.runPodSandbox({ config: sandboxConfig });
  for (const c of pod.spec.containers) {
    const { containerId } = await cri.createContainer({
      podSandboxId,
      sandboxConfig,
      config: {
        metadata: { name: c.name, attempt: 0 },
        image: { image: IMAGE },
        labels: { "io.kubernetes.pod.uid": uid, "io.kubernetes.container.name": c.name },
        linux: { resources: { cpusetCpus } },
      },
    });
    await cri.startContainer({ containerId });
  }
}

/** The fake runtime's containers grouped by pod uid, as the runtime manager lists them. */
async function listing(cri: FakeRuntime): Promise<RuntimePodContainers[]> {
  const byUid = new Map<string, RuntimePodContainers["containers"][number][]>();
  for (const c of (await cri.listContainers({})).containers) {
    const uid = c.labels["io.kubernetes.pod.uid"] ?? "";
    const state = c.state === "CONTAINER_RUNNING" ? "running" : "exited";
    byUid.set(uid, [
      ...(byUid.get(uid) ?? []),
      { id: c.id, name: c.labels["io.kubernetes.container.name"] ?? "", state },
    ]);
  }
  return [...byUid].map(([uid, containers]) => ({ uid, containers }));
}

async function cpusetOf(cri: FakeRuntime, uid: string): Promise<string | undefined> {
  const c = (await listing(cri)).find((p) => p.uid === uid)?.containers[0];
  if (c === undefined) return undefined;
  const status = await cri.containerStatus({ containerId: c.id });
  return status.status?.resources?.linux?.cpusetCpus;
}

function fakeCri(): FakeRuntime {
  const cri = createFakeRuntime();
  cri.images.add(IMAGE);
  return cri;
}

const firstContainer = (pod: Pod) => pod.spec.containers[0] ?? makeContainer();

const reconcilerOver = (cri: FakeRuntime, desired: (pod: Pod) => string) =>
  createCpuReconciler({
    runningPods: () => listing(cri),
    updateCpuset: async (containerId, cpusetCpus) => {
      await cri.updateContainerResources({ containerId, linux: { cpusetCpus } });
    },
    desired,
    logger: nullLogger,
  });

describe("CPU reconciler against the fake runtime", () => {
  test("writes the desired cpuset with UpdateContainerResources, then not again", async () => {
    const cri = fakeCri();
    await runPod(cri, burstable, "0-1");
    const r = reconcilerOver(cri, () => "0");
    expect(await r.reconcile([burstable])).toHaveLength(1);
    expect(await cpusetOf(cri, "uid-default-shared")).toBe("0");
    expect(await r.reconcile([burstable])).toEqual([]);
    expect(cri.callsOf("updateContainerResources")).toHaveLength(1);
  });

  test("a failed update is tried again on the next pass; removed containers are forgotten", async () => {
    const cri = fakeCri();
    await runPod(cri, burstable, "0-1");
    let fail = true;
    const r = createCpuReconciler({
      runningPods: () => listing(cri),
      updateCpuset: async (containerId, cpusetCpus) => {
        if (fail) throw new Error("runtime busy");
        await cri.updateContainerResources({ containerId, linux: { cpusetCpus } });
      },
      desired: () => "0",
      logger: nullLogger,
    });
    expect(await r.reconcile([burstable])).toEqual([]);
    fail = false;
    expect(await r.reconcile([burstable])).toHaveLength(1);
    for (const c of (await cri.listContainers({})).containers) {
      await cri.stopContainer({ containerId: c.id, timeout: 0 });
      await cri.removeContainer({ containerId: c.id });
    }
    await r.reconcile([burstable]);
    expect(r.lastApplied().size).toBe(0);
  });

  test("a listing that fails is logged and the pass does nothing", async () => {
    const r = createCpuReconciler({
      runningPods: () => Promise.reject(new Error("runtime down")),
      updateCpuset: () => Promise.reject(new Error("not called")),
      desired: () => "0",
      logger: nullLogger,
    });
    expect(await r.reconcile([burstable])).toEqual([]);
  });
});

describe("container manager with the static CPU policy", () => {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-cpu-reconcile-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const topo: CpuTopology = { cpus: [0, 1].map((id) => ({ id, core: id, socket: 0 })) };
  const none = { cpu: 0, memory: 0, ephemeralStorage: 0 };

  test("moves a shared-pool container off the CPUs a Guaranteed pod was just given", async () => {
    const cri = fakeCri();
    const cpu = createCpuManager({
      policy: "static",
      topology: topo,
      reserved: [0],
      stateFile: join(dir, "state"),
      logger: nullLogger,
    });
    cpu.start();
    const r = reconcilerOver(cri, (pod) => cpu.cpusetFor(pod, firstContainer(pod)));
    const cm = createContainerManager(
      {
        podsRoot: "/kubepods",
        podPidsLimit: 0,
        allocatable: {
          capacity: { cpu: 2000, memory: 4 * 2 ** 30, ephemeralStorage: 10 * 2 ** 30, pods: 10 },
          systemReserved: none,
          kubeReserved: none,
          evictionHard: {},
        },
      },
      { cgroups: undefined, cpu, cpuReconciler: r, logger: nullLogger },
    );
    expect(cm.admit(burstable, [])).toBeUndefined();
    await runPod(cri, burstable, cm.cpusetFor(burstable, firstContainer(burstable)));
    expect(await cpusetOf(cri, "uid-default-shared")).toBe("0-1");

    expect(cm.admit(guaranteed, [burstable])).toBeUndefined();
    expect(cm.cpusetFor(guaranteed, firstContainer(guaranteed))).toBe("1");
    await r.reconcile([]); // waits for the pass the admission started
    expect(await cpusetOf(cri, "uid-default-shared")).toBe("0");

    // The Guaranteed pod is gone: housekeeping frees its CPU and widens the shared pool again.
    await cm.housekeeping([burstable], () => false);
    expect(await cpusetOf(cri, "uid-default-shared")).toBe("0-1");
  });
});
