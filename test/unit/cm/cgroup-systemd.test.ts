// The systemd cgroup driver against a fake org.freedesktop.systemd1 served on a peer-to-peer
// socket as systemd serves /run/systemd/private (test/lib/fake-systemd.ts), with the cgroup files
// in a scratch folder laid out as a cgroup mount: slices started with their limits as typed
// properties, taken over when they exist, changed, stopped; their files written at the slice
// paths; pods found by their slices; the link reconnecting. No root needed.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cpuMask, createCgroupSystemd } from "../../../src/agent/cm/cgroup-systemd.ts";
import { createCgroupV1 } from "../../../src/agent/cm/cgroup-v1.ts";
import { createCgroupV2 } from "../../../src/agent/cm/cgroup-v2.ts";
import { createContainerManager } from "../../../src/agent/cm/container-manager.ts";
import { createCpuManager } from "../../../src/agent/cm/cpu-manager.ts";
import { setupContainerManager } from "../../../src/agent/cm/setup.ts";
import { connectSystemd } from "../../../src/agent/cm/systemd-connect.ts";
import { systemdCgroupPath } from "../../../src/agent/cm/systemd-names.ts";
import type { Pod } from "../../../src/api/types.ts";
import { realClock } from "../../../src/util/clock.ts";
import type { Variant } from "../../../src/util/dbus/types.ts";
import { UNLIMITED } from "../../../src/util/dbus/unit-properties.ts";
import { createLogger, nullLogger } from "../../../src/util/log.ts";
import { type FakeSystemd, servePrivateSocket } from "../../lib/fake-systemd.ts";

let scratch: string;
let fakes: FakeSystemd[];
let stopServer: () => void;
let socket: string;
/** The Version the next fake systemd reports. */
let fakeVersion: string;

beforeEach(async () => {
  scratch = mkdtempSync(join(tmpdir(), "fleetlet-cgroup-systemd-"));
  fakes = [];
  fakeVersion = "252.30-1~deb12u2";
  socket = join(scratch, "private");
  stopServer = await servePrivateSocket(socket, (f) => {
    f.version = fakeVersion;
    fakes.push(f);
  });
});
afterEach(() => {
  for (const f of fakes) f.close();
  stopServer();
  rmSync(scratch, { recursive: true, force: true });
});

function link(lines: string[] = []) {
  const logger = createLogger({ write: (l) => lines.push(l) });
  return connectSystemd({
    clock: realClock,
    logger,
    sockets: [{ path: socket, bus: false }],
  });
}

/** A cgroup v2 mount in the scratch folder offering the wanted controllers. */
async function v2Driver() {
  const mount = join(scratch, "cgroup");
  mkdirSync(mount);
  writeFileSync(join(mount, "cgroup.controllers"), "cpuset cpu io memory pids\n");
  const systemd = await link();
  const files = createCgroupV2({ mountPoint: mount, literalName: systemdCgroupPath });
  return { mount, cg: createCgroupSystemd({ files, systemd }) };
}

/** The properties of the fake's unit, as name → JS value. */
function props(name: string): Record<string, unknown> {
  const unit = fakes[0]?.units.get(name);
  if (unit === undefined) throw new Error(`the fake has no unit ${name}`);
  return Object.fromEntries([...unit.properties].map(([k, v]: [string, Variant]) => [k, v.value]));
}

describe("the systemd cgroup driver (fake systemd on a private socket; no root)", () => {
  test("the link logs systemd's version and how it reached it", async () => {
    const lines: string[] = [];
    const systemd = await link(lines);
    expect(systemd.version).toBe(252);
    expect(lines.join("\n")).toContain('connected to systemd version="252.30-1~deb12u2"');
    expect(lines.join("\n")).toContain('via="private socket"');
    systemd.close();
  });

  test("kubepods is started as kubepods.slice with accounting and its limits, and its files written", async () => {
    const { mount, cg } = await v2Driver();
    await cg.create("/kubepods", { cpuShares: 2048, memory: 3 * 1024 ** 3, pidsLimit: 4096 });
    expect(fakes[0]?.calls).toContain("StartTransientUnit kubepods.slice");
    expect(props("kubepods.slice")).toEqual({
      Description: "fleetlet cgroup /kubepods",
      DefaultDependencies: false,
      MemoryAccounting: true,
      CPUAccounting: true,
      IOAccounting: true,
      TasksAccounting: true,
      MemoryMax: 3n * 1024n ** 3n,
      CPUWeight: 79n,
      TasksMax: 4096n,
    });
    const dir = join(mount, "kubepods.slice");
    expect(readFileSync(join(dir, "memory.max"), "utf8")).toBe(String(3 * 1024 ** 3));
    expect(readFileSync(join(dir, "cpu.weight"), "utf8")).toBe("79");
    expect(readFileSync(join(mount, "cgroup.subtree_control"), "utf8")).toBe(
      "+cpuset +cpu +memory +pids",
    );
    expect(cg.literalName("/kubepods")).toBe("/kubepods.slice");
    cg.close();
  });

  test("a pod's slice wants its QoS slice; its quota is per second, rounded up to 10 ms, with the period (systemd ≥ 242)", async () => {
    const { mount, cg } = await v2Driver();
    const name = "/kubepods/burstable/pod12-ab";
    await cg.create(name, { cpuShares: 256, cpuQuota: 50_001, cpuPeriod: 100_000, memory: 0 });
    const unit = "kubepods-burstable-pod12_ab.slice";
    const p = props(unit);
    expect(p.Wants).toEqual(["kubepods-burstable.slice"]);
    expect(p.CPUQuotaPerSecUSec).toBe(510_000n);
    expect(p.CPUQuotaPeriodUSec).toBe(100_000n);
    expect(p.MemoryMax).toBe(UNLIMITED);
    const dir = join(mount, "kubepods.slice", "kubepods-burstable.slice", unit);
    expect(readFileSync(join(dir, "cpu.max"), "utf8")).toBe("50001 100000");
    expect(readFileSync(join(dir, "memory.max"), "utf8")).toBe("max");
    expect(await cg.exists(name)).toBe(true);
    expect(cg.paths(name)).toEqual([dir]);
    cg.close();
  });

  test("a slice left by an earlier run is taken as made and given the limits; update sets properties before files", async () => {
    const { mount, cg } = await v2Driver();
    await cg.create("/kubepods", { memory: 1000 });
    await cg.create("/kubepods", { memory: 2000 });
    expect(fakes[0]?.calls.slice(-2)).toEqual([
      "StartTransientUnit kubepods.slice",
      "SetUnitProperties kubepods.slice",
    ]);
    expect(props("kubepods.slice").MemoryMax).toBe(2000n);
    await cg.update("/kubepods", { memory: 3000, cpuShares: 2 });
    expect(props("kubepods.slice").MemoryMax).toBe(3000n);
    expect(props("kubepods.slice").CPUWeight).toBe(1n);
    expect(readFileSync(join(mount, "kubepods.slice", "memory.max"), "utf8")).toBe("3000");
    cg.close();
  });

  test("update of a slice systemd does not have fails, so the container manager makes it again", async () => {
    const { cg } = await v2Driver();
    await expect(cg.update("/kubepods/besteffort", { cpuShares: 2 })).rejects.toThrow("not loaded");
    cg.close();
  });

  test("destroy stops the slice, resets it and removes what is left of its folder", async () => {
    const { mount, cg } = await v2Driver();
    const name = "/kubepods/besteffort/pod9";
    await cg.create(name, {});
    const dir = join(
      mount,
      "kubepods.slice",
      "kubepods-besteffort.slice",
      "kubepods-besteffort-pod9.slice",
    );
    expect(existsSync(dir)).toBe(true);
    await cg.destroy(name);
    expect(fakes[0]?.calls.slice(-2)).toEqual([
      "StopUnit kubepods-besteffort-pod9.slice",
      "ResetFailedUnit kubepods-besteffort-pod9.slice",
    ]);
    expect(fakes[0]?.units.has("kubepods-besteffort-pod9.slice")).toBe(false);
    expect(existsSync(dir)).toBe(false);
    cg.close();
  });

  test("the container manager hands the runtime the pod slice's path and finds pods by their slices, not the runtime's scopes", async () => {
    const { mount, cg } = await v2Driver();
    const cm = createContainerManager(
      {
        podsRoot: "/kubepods",
        podPidsLimit: 0,
        allocatable: {
          capacity: { cpu: 2000, memory: 4 * 1024 ** 3, ephemeralStorage: 0, pods: 10 },
          systemReserved: { cpu: 0, memory: 0, ephemeralStorage: 0 },
          kubeReserved: { cpu: 0, memory: 0, ephemeralStorage: 0 },
          evictionHard: {},
        },
      },
      { cgroups: cg, cpu: noCpuManager(), logger: nullLogger, close: () => cg.close() },
    );
    await cm.start();
    const uid = "0b5c9f2e-1d3a-4e8f-9a6b-7c2d1e0f3a4b";
    const pod = burstablePod(uid);
    await cm.ensurePodCgroup(pod);
    const slice = `kubepods-burstable-pod${uid.replaceAll("-", "_")}.slice`;
    expect(cm.podCgroupParent(pod)).toBe(`/kubepods.slice/kubepods-burstable.slice/${slice}`);
    mkdirSync(
      join(mount, "kubepods.slice", "kubepods-burstable.slice", slice, "cri-containerd-abc.scope"),
    );
    mkdirSync(join(mount, "kubepods.slice", "kubepods-burstable.slice", "cri-containerd-x.scope"));
    expect(await cm.listPodCgroups()).toEqual(new Map([[uid, `/kubepods/burstable/pod${uid}`]]));
    // A gone pod's slice is stopped (systemd then removes its folder, which a scratch folder
    // holding written files cannot show).
    await cm.housekeeping([], () => false);
    expect(fakes[0]?.calls).toContain(`StopUnit ${slice}`);
    expect(fakes[0]?.units.has(slice)).toBe(false);
    cm.close();
  });

  test("on cgroup v1 the limits are v1 properties; an older systemd gets no quota period and no AllowedCPUs", async () => {
    const memory = join(scratch, "memory");
    const cpu = join(scratch, "cpu");
    for (const d of [memory, cpu]) mkdirSync(d);
    fakeVersion = "240";
    const systemd = await link();
    const files = createCgroupV1({
      controllers: new Map([
        ["memory", memory],
        ["cpu", cpu],
      ]),
      literalName: systemdCgroupPath,
    });
    const cg = createCgroupSystemd({ files, systemd });
    await cg.create("/kubepods", {
      memory: 5000,
      cpuShares: 512,
      cpuQuota: 20_000,
      cpuPeriod: 50_000,
      cpusetCpus: "0",
    });
    const p = props("kubepods.slice");
    expect(p.MemoryLimit).toBe(5000n);
    expect(p.CPUShares).toBe(512n);
    expect(p.CPUQuotaPerSecUSec).toBe(400_000n);
    expect(p.CPUQuotaPeriodUSec).toBeUndefined();
    expect(p.AllowedCPUs).toBeUndefined();
    expect(readFileSync(join(memory, "kubepods.slice", "memory.limit_in_bytes"), "utf8")).toBe(
      "5000",
    );
    expect(readFileSync(join(cpu, "kubepods.slice", "cpu.cfs_period_us"), "utf8")).toBe("50000");
    cg.close();
  });

  test("systemd ≥ 244 on v2 gets the cpuset as AllowedCPUs", async () => {
    const { cg } = await v2Driver();
    await cg.create("/kubepods", { cpusetCpus: "0,2,9" });
    expect(props("kubepods.slice").AllowedCPUs).toEqual([0b101, 0b10]);
    expect(cpuMask("")).toEqual([]);
    cg.close();
  });

  test("when systemd closes the connection, the next call connects again", async () => {
    const lines: string[] = [];
    const systemd = await link(lines);
    fakes[0]?.close();
    await Bun.sleep(50);
    await systemd.startTransientUnit("kubepods.slice", []);
    expect(fakes).toHaveLength(2);
    expect(fakes[1]?.units.has("kubepods.slice")).toBe(true);
    expect(lines.join("\n")).toContain("connection to systemd lost; the next call connects again");
    systemd.close();
    await expect(systemd.stopUnit("kubepods.slice")).rejects.toThrow("closed");
  });

  test("no socket answering is one error naming each", async () => {
    const missing = join(scratch, "none");
    await expect(
      connectSystemd({
        clock: realClock,
        logger: nullLogger,
        sockets: [{ path: missing, bus: false }],
      }),
    ).rejects.toThrow(
      `Cannot reach systemd over D-Bus (${missing}: Cannot connect to D-Bus at ${missing}`,
    );
  });

  test("the container manager's setup refuses the systemd driver on a machine not booted with systemd", async () => {
    await expect(
      setupContainerManager(
        {
          rootDir: scratch,
          maxPods: 10,
          cgroupRoot: "/",
          cgroupsPerQOS: true,
          cgroupDriver: "systemd",
          systemReserved: {},
          kubeReserved: {},
          evictionHard: {},
          podPidsLimit: 0,
          cpuManagerPolicy: "none",
          reservedSystemCPUs: "",
          cpuManagerStateFile: join(scratch, "cpu_manager_state"),
        },
        {
          logger: nullLogger,
          topology: async () => ({ cpus: [{ id: 0, core: 0, socket: 0 }] }),
          systemdBooted: () => false,
        },
      ),
    ).rejects.toThrow('cgroupDriver: "systemd" needs systemd as init');
  });
});

function noCpuManager() {
  return createCpuManager({
    policy: "none",
    topology: { cpus: [{ id: 0, core: 0, socket: 0 }] },
    reserved: [],
    stateFile: join(scratch, "cpu_manager_state"),
    logger: nullLogger,
  });
}

function burstablePod(uid: string): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p", namespace: "default", uid },
    spec: {
      containers: [
        { name: "c", image: "busybox", resources: { requests: { cpu: "250m", memory: "32Mi" } } },
      ],
    },
  };
}
