import { describe, expect, test } from "bun:test";
import {
  buildNode,
  CPU_MODEL_ANNOTATION,
  createNodeStatusManager,
  goArch,
  type NodeFacts,
  type NodeState,
  nodeChanged,
  prettyName,
} from "../../../src/agent/nodestatus/index.ts";
import type { Node } from "../../../src/api/node.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";

const T0 = Date.UTC(2026, 0, 1, 10, 0, 0);
const at = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

const facts: NodeFacts = {
  nodeName: "cam-1",
  hostname: "cam-1.local",
  hostIP: "10.0.0.7",
  machineID: "m1",
  systemUUID: "u1",
  bootID: "b1",
  kernelVersion: "6.1.0-rpi",
  osImage: "Debian GNU/Linux 12 (bookworm)",
  operatingSystem: "linux",
  architecture: "arm64",
  kubeletVersion: "fleetlet/0.1.0",
  cpuCores: 4,
  cpuModel: "ARM Cortex-A72",
  memoryBytes: 4 * 1024 ** 3,
  maxPods: 110,
  configLabels: { site: "a", "kubernetes.io/hostname": "spoofed" },
};

const healthy: NodeState = {
  runtimeHealthy: true,
  runtimeReasons: [],
  runtimeVersion: "containerd://1.6.20",
  ephemeralStorageBytes: 32 * 1024 ** 3,
};
const unhealthy: NodeState = {
  ...healthy,
  runtimeHealthy: false,
  runtimeReasons: ["container runtime is down: connect ENOENT"],
};

const cond = (n: Node, type: string) => n.status.conditions?.find((c) => c.type === type);

describe("buildNode()", () => {
  test("reports capacity in kubelet's units, allocatable equal to capacity by default", () => {
    const n = buildNode(facts, healthy, T0, undefined);
    expect(n.status.capacity).toEqual({
      cpu: "4",
      memory: "4194304Ki",
      pods: "110",
      "ephemeral-storage": "33554432Ki",
    });
    expect(n.status.allocatable).toEqual(n.status.capacity);
  });

  test("adds the device manager's extended resources: every device to capacity, healthy ones to allocatable", () => {
    const devices = {
      capacity: { "fleetlet.io/serial": "3" },
      allocatable: { "fleetlet.io/serial": "2" },
    };
    const n = buildNode(facts, { ...healthy, devices }, T0, undefined);
    expect(n.status.capacity?.["fleetlet.io/serial"]).toBe("3");
    expect(n.status.allocatable?.["fleetlet.io/serial"]).toBe("2");
    expect(n.status.capacity?.cpu).toBe(n.status.allocatable?.cpu);
  });

  test("takes allocatable from the container manager's hook over capacity", () => {
    const n = buildNode(facts, { ...healthy, allocatable: { memory: "3000000Ki" } }, T0, undefined);
    expect(n.status.allocatable?.memory).toBe("3000000Ki");
    expect(n.status.allocatable?.cpu).toBe("4");
  });

  test("labels the node with hostname, os and arch over the config's labels", () => {
    const n = buildNode(facts, healthy, T0, undefined);
    expect(n.metadata.labels).toMatchObject({
      site: "a",
      "kubernetes.io/hostname": "cam-1",
      "kubernetes.io/os": "linux",
      "kubernetes.io/arch": "arm64",
    });
    expect(n.metadata.annotations?.[CPU_MODEL_ANNOTATION]).toBe("ARM Cortex-A72");
  });

  test("fills nodeInfo and addresses from the facts and the runtime version", () => {
    const n = buildNode(facts, healthy, T0, undefined);
    expect(n.status.nodeInfo).toMatchObject({
      machineID: "m1",
      bootID: "b1",
      containerRuntimeVersion: "containerd://1.6.20",
      kubeletVersion: "fleetlet/0.1.0",
      architecture: "arm64",
      operatingSystem: "linux",
    });
    expect(n.status.addresses).toEqual([
      { type: "InternalIP", address: "10.0.0.7" },
      { type: "Hostname", address: "cam-1.local" },
    ]);
  });

  test("is Ready True with FleetletReady and no pressure while the runtime is healthy", () => {
    const n = buildNode(facts, healthy, T0, undefined);
    expect(n.status.conditions?.map((c) => [c.type, c.status, c.reason])).toEqual([
      ["MemoryPressure", "False", "FleetletHasSufficientMemory"],
      ["DiskPressure", "False", "FleetletHasNoDiskPressure"],
      ["PIDPressure", "False", "FleetletHasSufficientPID"],
      ["Ready", "True", "FleetletReady"],
    ]);
    expect(cond(n, "Ready")?.message).toBe("fleetlet is posting ready status");
  });

  test("is Ready False with the runtime's reasons while the runtime is unhealthy", () => {
    const n = buildNode(facts, unhealthy, T0, undefined);
    expect(cond(n, "Ready")).toMatchObject({
      status: "False",
      reason: "FleetletNotReady",
      message: "container runtime is down: connect ENOENT",
    });
  });

  test("moves lastHeartbeatTime every update but lastTransitionTime only on a status change", () => {
    const n1 = buildNode(facts, healthy, T0, undefined);
    const n2 = buildNode(facts, healthy, T0 + 10_000, n1);
    expect(cond(n2, "Ready")).toMatchObject({
      lastHeartbeatTime: at(T0 + 10_000),
      lastTransitionTime: at(T0),
    });
    const n3 = buildNode(facts, unhealthy, T0 + 20_000, n2);
    expect(cond(n3, "Ready")?.lastTransitionTime).toBe(at(T0 + 20_000));
    expect(cond(n3, "MemoryPressure")?.lastTransitionTime).toBe(at(T0));
    const n4 = buildNode(facts, unhealthy, T0 + 30_000, n3);
    expect(cond(n4, "Ready")?.lastTransitionTime).toBe(at(T0 + 20_000));
  });

  test("reports the image GC's image list as status.images, and none before it is listed", () => {
    const images = [{ names: ["r@sha256:1", "r:1"], sizeBytes: 1234 }];
    const n = buildNode(facts, { ...healthy, images }, T0, undefined);
    expect(n.status.images).toEqual(images);
    expect("images" in buildNode(facts, healthy, T0, undefined).status).toBe(false);
    expect(nodeChanged(n, buildNode(facts, { ...healthy, images: [] }, T0, n))).toBe(true);
  });

  test("nodeChanged() ignores heartbeat times and sees a condition change", () => {
    const n1 = buildNode(facts, healthy, T0, undefined);
    expect(nodeChanged(n1, buildNode(facts, healthy, T0 + 10_000, n1))).toBe(false);
    expect(nodeChanged(n1, buildNode(facts, unhealthy, T0 + 10_000, n1))).toBe(true);
    expect(nodeChanged(undefined, n1)).toBe(true);
  });
});

describe("node facts helpers", () => {
  test("prettyName() reads PRETTY_NAME, quoted or not", () => {
    expect(prettyName('NAME="Debian"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n')).toBe(
      "Debian GNU/Linux 12 (bookworm)",
    );
    expect(prettyName("PRETTY_NAME=Alpine")).toBe("Alpine");
    expect(prettyName("")).toBe("Linux");
  });

  test("goArch() maps node's arch names to Kubernetes' GOARCH names", () => {
    expect(goArch("x64")).toBe("amd64");
    expect(goArch("arm64")).toBe("arm64");
    expect(goArch("riscv64")).toBe("riscv64");
  });
});

describe("createNodeStatusManager()", () => {
  function setup() {
    const clock = new FakeClock(T0);
    let ok = true;
    const reports: Node[] = [];
    const m = createNodeStatusManager({
      clock,
      logger: nullLogger,
      facts,
      health: { healthy: () => ok, reasons: () => (ok ? [] : ["runtime down"]) },
      runtimeVersion: async () => "containerd://1.6.20",
      ephemeralStorage: async () => 1024 ** 3,
      reportFrequencyMs: 60_000,
    });
    m.subscribe((n) => reports.push(n));
    return { clock, m, reports, setHealthy: (v: boolean) => (ok = v) };
  }

  test("reports the first node, then only changes or after the report frequency", async () => {
    const { clock, m, reports, setHealthy } = setup();
    await m.update();
    expect(reports).toHaveLength(1);
    expect(reports[0]?.status.nodeInfo?.containerRuntimeVersion).toBe("containerd://1.6.20");
    clock.step(10_000);
    await m.update();
    expect(reports).toHaveLength(1);
    setHealthy(false);
    await m.update();
    expect(reports).toHaveLength(2);
    expect(cond(m.node(), "Ready")?.status).toBe("False");
    clock.step(60_000);
    await m.update();
    expect(reports).toHaveLength(3);
  });

  test("run() rebuilds the node as soon as runtime health changes", async () => {
    const { clock, m, setHealthy } = setup();
    const ac = new AbortController();
    const running = m.run(ac.signal);
    await Bun.sleep(0);
    setHealthy(false);
    clock.step(500);
    for (let i = 0; i < 5; i++) await Bun.sleep(0);
    expect(cond(m.node(), "Ready")?.status).toBe("False");
    ac.abort();
    await running;
  });
});
