import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, lstatSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createVolumeManager, type VolumeManager } from "../../../src/agent/volumes/index.ts";
import type { ConfigMap, Pod, Volume } from "../../../src/api/index.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";
import { FakeMounter } from "../../lib/fake-mounter.ts";

let dir: string;
let mounter: FakeMounter;
let objects: Map<string, ConfigMap>;
let events: string[];
let vm: VolumeManager;
const GiB = 1024 ** 3;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "fleetlet-volumes-"));
  mounter = new FakeMounter();
  objects = new Map();
  events = [];
  vm = createVolumeManager({
    rootDir: dir,
    nodeName: "dev1",
    objects: { configMap: (_ns, name) => objects.get(name), secret: () => undefined },
    allocatable: () => ({ cpu: 2000, memory: 2 * GiB, ephemeralStorage: 0 }),
    clock: new FakeClock(Date.UTC(2026, 0, 1)),
    logger: nullLogger,
    recorder: (pod, type, reason, message) =>
      events.push(`${pod.metadata.name} ${type} ${reason} ${message}`),
    mounter,
  });
});
afterEach(() => rm(dir, { recursive: true, force: true }));

function podWith(volumes: Volume[], memoryLimit?: string): Pod {
  const resources = memoryLimit ? { limits: { memory: memoryLimit } } : {};
  return makePod({
    name: "web",
    containers: [makeContainer({ resources })],
    spec: { containers: [], volumes },
  });
}

const volPath = (plugin: string, name: string) =>
  join(dir, "pods", "uid-default-web", "volumes", plugin, name);
const cm = (value: string): ConfigMap => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name: "cfg", namespace: "default" },
  data: { key: value },
});

describe("volume manager mountPod()", () => {
  test("writes a configMap volume on disk and mounts in-memory volumes as tmpfs, sized as the kubelet does", async () => {
    objects.set("cfg", cm("v1"));
    const pod = podWith(
      [
        { name: "c", configMap: { name: "cfg", defaultMode: 0o644 } },
        {
          name: "d",
          downwardAPI: {
            items: [{ path: "n", fieldRef: { fieldPath: "metadata.name" } }],
            defaultMode: 0o644,
          },
        },
        { name: "m", emptyDir: { medium: "Memory" } },
        { name: "small", emptyDir: { medium: "Memory", sizeLimit: "1Mi" } },
        { name: "big", emptyDir: { medium: "Memory", sizeLimit: "1Ti" } },
        { name: "disk", emptyDir: {} },
      ],
      "64Mi",
    );
    expect(await vm.mountPod(pod, false)).toEqual({ ready: true, failed: [] });
    expect(readFileSync(join(volPath("kubernetes.io~configmap", "c"), "key"), "utf8")).toBe("v1");
    expect(readFileSync(join(volPath("kubernetes.io~downward-api", "d"), "n"), "utf8")).toBe("web");
    expect(Object.fromEntries(mounter.sizes)).toEqual({
      [volPath("kubernetes.io~downward-api", "d")]: 64 * 1024 ** 2,
      [volPath("kubernetes.io~empty-dir", "m")]: 64 * 1024 ** 2,
      [volPath("kubernetes.io~empty-dir", "small")]: 1024 ** 2,
      [volPath("kubernetes.io~empty-dir", "big")]: 64 * 1024 ** 2,
    });
    expect(lstatSync(volPath("kubernetes.io~empty-dir", "disk")).mode & 0o777).toBe(0o777);
    expect(vm.hostPath(pod, "c")).toEqual({
      path: volPath("kubernetes.io~configmap", "c"),
      readOnly: true,
    });
    expect(vm.hostPath(pod, "disk")).toEqual({
      path: volPath("kubernetes.io~empty-dir", "disk"),
      readOnly: false,
    });
    // A pod with no memory limit gets node allocatable.
    await vm.mountPod(
      makePod({
        name: "other",
        spec: { containers: [], volumes: [{ name: "m", emptyDir: { medium: "Memory" } }] },
      }),
      false,
    );
    expect([...mounter.sizes.values()].at(-1)).toBe(2 * GiB);
  });

  test("a missing ConfigMap is a FailedMount that blocks the pod until it appears; then updates follow it", async () => {
    const pod = podWith([{ name: "c", configMap: { name: "cfg", defaultMode: 0o644 } }]);
    expect(await vm.mountPod(pod, false)).toEqual({
      ready: false,
      failed: [{ volume: "c", message: 'configmap "cfg" not found' }],
    });
    expect(events).toEqual([
      'web Warning FailedMount MountVolume.SetUp failed for volume "c" : configmap "cfg" not found',
    ]);
    objects.set("cfg", cm("v1"));
    expect((await vm.mountPod(pod, false)).ready).toBe(true);
    objects.set("cfg", cm("v2"));
    await vm.mountPod(pod, true);
    expect(readFileSync(join(volPath("kubernetes.io~configmap", "c"), "key"), "utf8")).toBe("v2");
    // Deleted later: the last content stays and the pod is not blocked.
    objects.delete("cfg");
    expect(await vm.mountPod(pod, false)).toMatchObject({ ready: true, failed: [{ volume: "c" }] });
    expect(readFileSync(join(volPath("kubernetes.io~configmap", "c"), "key"), "utf8")).toBe("v2");
  });

  test("a pod already running is not blocked by a volume that fails (an agent restarted meanwhile)", async () => {
    const pod = podWith([{ name: "c", configMap: { name: "cfg", defaultMode: 0o644 } }]);
    expect((await vm.mountPod(pod, true)).ready).toBe(true);
  });

  test("never mounts over a tmpfs that is already there, and refuses another filesystem", async () => {
    const pod = podWith([{ name: "m", emptyDir: { medium: "Memory" } }]);
    mounter.mounts.set(volPath("kubernetes.io~empty-dir", "m"), "tmpfs");
    await vm.mountPod(pod, true);
    expect(mounter.calls).toEqual([]);
    mounter.mounts.set(volPath("kubernetes.io~empty-dir", "m"), "ext4");
    const other = createVolumeManager({
      rootDir: dir,
      nodeName: "dev1",
      objects: { configMap: () => undefined, secret: () => undefined },
      allocatable: () => ({ cpu: 0, memory: GiB, ephemeralStorage: 0 }),
      clock: new FakeClock(0),
      logger: nullLogger,
      recorder: () => {},
      mounter,
    });
    expect((await other.mountPod(pod, false)).failed[0]?.message).toContain(
      "is already a mount point of a ext4 filesystem",
    );
  });

  test("checks hostPath types with the kubelet's messages, creating the *OrCreate ones", async () => {
    const created = join(dir, "made");
    const pod = podWith([
      { name: "a", hostPath: { path: created, type: "DirectoryOrCreate" } },
      { name: "b", hostPath: { path: join(dir, "missing"), type: "Directory" } },
      { name: "c", hostPath: { path: join(created, "f"), type: "FileOrCreate" } },
      { name: "d", hostPath: { path: created, type: "File" } },
    ]);
    const result = await vm.mountPod(pod, false);
    expect(lstatSync(created).isDirectory()).toBe(true);
    expect(lstatSync(join(created, "f")).isFile()).toBe(true);
    expect(result.failed).toEqual([
      {
        volume: "b",
        message: `hostPath type check failed: ${join(dir, "missing")} is not a directory`,
      },
      { volume: "d", message: `hostPath type check failed: ${created} is not a file` },
    ]);
  });

  test("lists disk emptyDirs with a sizeLimit for the eviction manager", () => {
    const pod = podWith([
      { name: "a", emptyDir: { sizeLimit: "10Mi" } },
      { name: "b", emptyDir: { medium: "Memory", sizeLimit: "1Mi" } },
      { name: "c", emptyDir: {} },
    ]);
    expect(vm.diskEmptyDirLimits(pod)).toEqual([
      { volume: "a", path: volPath("kubernetes.io~empty-dir", "a"), limitBytes: 10 * 1024 ** 2 },
    ]);
  });
});

describe("volume manager removePod()", () => {
  test("unmounts every mount under the pod's folder, one inside another first, then removes it", async () => {
    const pod = podWith([{ name: "m", emptyDir: { medium: "Memory" } }]);
    await vm.mountPod(pod, false);
    const inner = join(volPath("kubernetes.io~empty-dir", "m"), "x");
    mounter.mounts.set(inner, "bind");
    expect(await vm.removePod("uid-default-web")).toBe(true);
    expect(mounter.calls.slice(-2)).toEqual([
      `umount ${inner}`,
      `umount ${volPath("kubernetes.io~empty-dir", "m")}`,
    ]);
    expect(existsSync(join(dir, "pods", "uid-default-web"))).toBe(false);
  });

  test("keeps the folder, and its content, while something stays mounted in it", async () => {
    const pod = podWith([{ name: "m", emptyDir: { medium: "Memory" } }]);
    await vm.mountPod(pod, false);
    mounter.busy.add(volPath("kubernetes.io~empty-dir", "m"));
    expect(await vm.removePod("uid-default-web")).toBe(false);
    expect(existsSync(volPath("kubernetes.io~empty-dir", "m"))).toBe(true);
  });
});
