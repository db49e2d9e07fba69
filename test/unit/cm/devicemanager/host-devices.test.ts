import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdir, mkdtemp, realpath, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type HostDeviceStat,
  nodeHostDeviceFs,
  scanHostDevices,
} from "../../../../src/agent/cm/devicemanager/host-device-scan.ts";
import {
  createHostDeviceGroup,
  type HostDeviceEndpoint,
} from "../../../../src/agent/cm/devicemanager/host-devices.ts";
import type { PluginDevice } from "../../../../src/agent/cm/devicemanager/index.ts";
import { FakeClock } from "../../../../src/util/clock.ts";
import { createLogger } from "../../../../src/util/log.ts";
import { until } from "../../../lib/until.ts";

// Device nodes without root: plain files that the injected stat reports as character or block
// devices with a device number; symlinks to them are real.
let dir: string;
let nodes: Map<string, { kind: "c" | "b"; rdev: number }>;
const groups: HostDeviceEndpoint[] = [];

beforeEach(async () => {
  dir = await realpath(await mkdtemp(join(tmpdir(), "fleetlet-host-devices-")));
  nodes = new Map();
});
afterEach(async () => {
  for (const g of groups.splice(0)) g.close();
  await rm(dir, { recursive: true, force: true });
});

async function fakeStat(path: string): Promise<HostDeviceStat> {
  const real = await stat(path);
  const node = nodes.get(path);
  if (node === undefined) return real;
  return {
    isCharacterDevice: () => node.kind === "c",
    isBlockDevice: () => node.kind === "b",
    isDirectory: () => false,
    rdev: node.rdev,
    ino: real.ino,
  };
}
const fakeFs = { ...nodeHostDeviceFs, stat: fakeStat };

let nextRdev = 1;
/** Makes a fake device node at `name` under the temp dir (another number unless `rdev`). */
async function mknod(name: string, kind: "c" | "b" = "c", rdev = nextRdev++): Promise<string> {
  const path = join(dir, name);
  await mkdir(join(path, ".."), { recursive: true });
  await writeFile(path, "");
  nodes.set(path, { kind, rdev });
  return path;
}
async function link(name: string, target: string): Promise<string> {
  const path = join(dir, name);
  await mkdir(join(path, ".."), { recursive: true });
  await symlink(target, path);
  return path;
}
async function scan(...patterns: string[]) {
  return scanHostDevices(
    patterns.map((p) => join(dir, p)),
    fakeFs,
  );
}
const rel = (devices: { path: string; hostPath: string }[]) =>
  devices.map((d) => [d.path.slice(dir.length + 1), d.hostPath.slice(dir.length + 1)]);

function group(
  paths: string[],
  deps: Parameters<typeof createHostDeviceGroup>[1] = {},
  podsPerDevice = 1,
): HostDeviceEndpoint {
  const g = createHostDeviceGroup(
    { name: "fleetlet.io/serial", paths: paths.map((p) => join(dir, p)), podsPerDevice },
    { fs: { stat: fakeStat }, debounceMs: 10, rescanMs: 60_000, ...deps },
  );
  groups.push(g);
  return g;
}
/** Starts the group's watch; the lists it gives, in order, as paths under the temp dir. */
function watchLists(g: HostDeviceEndpoint): string[][] {
  const lists: string[][] = [];
  g.watch(
    (devices: PluginDevice[]) => {
      expect(devices.every((d) => d.healthy)).toBe(true);
      lists.push(devices.map((d) => d.id.slice(dir.length + 1)));
    },
    () => {
      throw new Error("onEnd called");
    },
  );
  return lists;
}

describe("scanHostDevices()", () => {
  beforeEach(async () => {
    await mknod("ttyUSB0");
    await mknod("ttyUSB1");
    await mknod("ttyS0");
    await mknod("sda", "b");
    await writeFile(join(dir, "ttyUSB.log"), "");
    await mkdir(join(dir, "ttyUSBdir"));
  });

  const cases: [string[], string[]][] = [
    [["ttyUSB*"], ["ttyUSB0", "ttyUSB1"]],
    [["ttyUSB?"], ["ttyUSB0", "ttyUSB1"]],
    [["ttyUSB[1-9]"], ["ttyUSB1"]],
    [["tty[!U]*"], ["ttyS0"]],
    [["tty[^U]*"], ["ttyS0"]],
    [
      ["sd*", "ttyS0"],
      ["sda", "ttyS0"],
    ],
    [["ttyACM*", "ttyS1"], []],
    [["*"], ["sda", "ttyS0", "ttyUSB0", "ttyUSB1"]],
  ];
  for (const [patterns, expected] of cases) {
    test(`${patterns.join(", ")} keeps the character and block devices it matches: ${expected.join(", ") || "none"}`, async () => {
      const found = await scan(...patterns);
      expect(rel(found.devices)).toEqual(expected.map((p) => [p, p]));
      expect(found.missing).toBe(false);
      expect(found.problems).toEqual([]);
    });
  }

  test("resolves symlinks to the node; the first pattern, then the first name, wins a node", async () => {
    await link("serial/by-id/usb-FTDI_B", "../../ttyUSB0");
    await link("serial/by-id/usb-FTDI_A", "../../ttyUSB0");
    await link("serial/by-id/usb-gone", "../../ttyUSB9");
    expect(rel((await scan("serial/by-id/*", "ttyUSB*")).devices)).toEqual([
      ["serial/by-id/usb-FTDI_A", "ttyUSB0"],
      ["ttyUSB1", "ttyUSB1"],
    ]);
    expect(rel((await scan("ttyUSB*", "serial/by-id/*")).devices)).toEqual([
      ["ttyUSB0", "ttyUSB0"],
      ["ttyUSB1", "ttyUSB1"],
    ]);
  });

  test("two nodes with one device number are one device; a block and a character node are two", async () => {
    await mknod("cam0", "c", 500);
    await mknod("cam1", "c", 500);
    await mknod("disk0", "b", 500);
    expect(rel((await scan("cam*", "disk*")).devices)).toEqual([
      ["cam0", "cam0"],
      ["disk0", "disk0"],
    ]);
  });

  test("matches wildcards in middle segments, level by level, and notes every folder read", async () => {
    await mknod("bus/usb/002/001");
    await mknod("bus/usb/001/003");
    await mknod("bus/usb/001/002");
    await writeFile(join(dir, "bus/usb/README"), "");
    const found = await scan("bus/usb/*/*");
    expect(rel(found.devices).map(([p]) => p)).toEqual([
      "bus/usb/001/002",
      "bus/usb/001/003",
      "bus/usb/002/001",
    ]);
    expect([...found.folders.keys()].map((f) => f.slice(dir.length + 1))).toEqual([
      "bus/usb",
      "bus/usb/001",
      "bus/usb/002",
    ]);
    expect(found.missing).toBe(false);
  });

  test("a folder that does not exist yet is missing, and its nearest existing parent noted", async () => {
    const found = await scan("serial/by-id/*");
    expect(found.devices).toEqual([]);
    expect(found.missing).toBe(true);
    expect([...found.folders.keys()]).toEqual([dir]);
  });
});

describe("createHostDeviceGroup()", () => {
  test("serves the group in process: no preferred allocation, no PreStartContainer", async () => {
    const g = group(["ttyUSB*"]);
    expect(g.resourceName).toBe("fleetlet.io/serial");
    expect(g.options).toEqual({ preStartRequired: false, getPreferredAllocationAvailable: false });
    await expect(g.preferredAllocation([], [], 1)).rejects.toThrow(
      'Host devices "fleetlet.io/serial" offer no GetPreferredAllocation',
    );
    await expect(g.preStartContainer([])).rejects.toThrow(
      'Host devices "fleetlet.io/serial" need no PreStartContainer',
    );
  });

  test("lists a node under podsPerDevice ids, all healthy", async () => {
    await mknod("ttyUSB0");
    await mknod("ttyUSB1");
    const g = group(["ttyUSB*"], {}, 2);
    const p = (name: string) => join(dir, name);
    expect(await g.rescan()).toEqual([
      { id: `${p("ttyUSB0")}#0`, healthy: true },
      { id: `${p("ttyUSB0")}#1`, healthy: true },
      { id: `${p("ttyUSB1")}#0`, healthy: true },
      { id: `${p("ttyUSB1")}#1`, healthy: true },
    ]);
  });

  test("allocate() gives each distinct node once, at the path it matched, with rwm", async () => {
    await mknod("ttyUSB0");
    await mknod("ttyUSB1");
    const byId = await link("serial/by-id/usb-FTDI_A", "../../ttyUSB0");
    const g = group(["serial/by-id/*", "ttyUSB*"], {}, 2);
    await g.rescan();
    const allocation = await g.allocate([`${byId}#0`, `${byId}#1`, `${join(dir, "ttyUSB1")}#1`]);
    expect(allocation).toEqual({
      envs: {},
      mounts: [],
      devices: [
        { containerPath: byId, hostPath: join(dir, "ttyUSB0"), permissions: "rwm" },
        { containerPath: join(dir, "ttyUSB1"), hostPath: join(dir, "ttyUSB1"), permissions: "rwm" },
      ],
      annotations: {},
      cdiDevices: [],
    });
  });

  test("allocate() of a device it does not list fails naming the id and the group", async () => {
    await mknod("ttyUSB0");
    const g = group(["ttyUSB*"]);
    await g.rescan();
    const gone = join(dir, "ttyUSB7");
    await expect(g.allocate([gone])).rejects.toThrow(
      `Cannot allocate host device "${gone}" of "fleetlet.io/serial": no such device now (devices: ${join(dir, "ttyUSB0")})`,
    );
  });

  test("watch() lists at once, then again when a matching node appears or goes, and only then", async () => {
    await mknod("ttyUSB0");
    const g = group(["ttyUSB*"]);
    const lists = watchLists(g);
    await until("the first list", () => lists.length === 1);
    expect(lists).toEqual([["ttyUSB0"]]);

    await mknod("ttyUSB1");
    await until("the new node listed", () => lists.length === 2);
    expect(lists[1]).toEqual(["ttyUSB0", "ttyUSB1"]);

    await writeFile(join(dir, "notes.txt"), "not a device");
    await g.rescan();
    expect(lists).toHaveLength(2);

    await rm(join(dir, "ttyUSB0"));
    await until("the removed node gone", () => lists.length === 3);
    expect(lists[2]).toEqual(["ttyUSB1"]);
  });

  test("watch() sees a folder made after it started, through the watch of its parent", async () => {
    await mknod("ttyUSB0");
    const g = group(["serial/by-id/*"]);
    const lists = watchLists(g);
    await until("the first list", () => lists.length === 1);
    expect(lists).toEqual([[]]);
    await link("serial/by-id/usb-FTDI_A", "../../ttyUSB0");
    await until("the by-id name listed", () => lists.length === 2);
    expect(lists[1]).toEqual(["serial/by-id/usb-FTDI_A"]);
  });

  test("watch() follows a folder removed and made again", async () => {
    await mknod("ttyUSB0");
    await link("serial/by-id/usb-FTDI_A", "../../ttyUSB0");
    const g = group(["serial/by-id/*"]);
    const lists = watchLists(g);
    await until("the first list", () => lists.length === 1);
    await rm(join(dir, "serial"), { recursive: true });
    await until("an empty list", () => lists.length === 2);
    expect(lists[1]).toEqual([]);
    await link("serial/by-id/usb-FTDI_B", "../../ttyUSB0");
    await until("the new name listed", () => lists.length === 3);
    expect(lists[2]).toEqual(["serial/by-id/usb-FTDI_B"]);
  });

  test("rescans on a timer while a folder is missing, and stops once it is there", async () => {
    await mknod("ttyUSB0");
    const clock = new FakeClock();
    const noWatch = () => () => {};
    const g = group(["serial/by-id/*"], {
      clock,
      rescanMs: 2_000,
      fs: { stat: fakeStat, watch: noWatch },
    });
    const lists = watchLists(g);
    await until("the first list", () => lists.length === 1);
    expect(lists).toEqual([[]]);
    // The scan that follows new watches, then only the rescan timer is left.
    clock.step(100);
    await g.rescan();
    expect(clock.pending).toBe(1);

    await link("serial/by-id/usb-FTDI_A", "../../ttyUSB0");
    clock.step(1_900);
    await until("the rescan's list", () => lists.length === 2);
    expect(lists[1]).toEqual(["serial/by-id/usb-FTDI_A"]);
    clock.step(100);
    await g.rescan();
    expect(clock.pending).toBe(0);
  });

  test("a node that comes between a folder's read and the start of its watch is seen by the scan after", async () => {
    await mkdir(join(dir, "serial/by-id"), { recursive: true });
    const node = await mknod("ttyUSB0");
    const clock = new FakeClock();
    const readdir = async (d: string) => {
      const names = await nodeHostDeviceFs.readdir(d);
      if (d === join(dir, "serial/by-id") && names.length === 0)
        await symlink(node, join(d, "usb-FTDI_A"));
      return names;
    };
    const g = group(["serial/by-id/*"], {
      clock,
      fs: { stat: fakeStat, readdir, watch: () => () => {} },
    });
    const lists = watchLists(g);
    await until("the first list", () => lists.length === 1);
    expect(lists).toEqual([[]]);
    clock.step(100);
    await until("the second list", () => lists.length === 2);
    expect(lists[1]).toEqual(["serial/by-id/usb-FTDI_A"]);
  });

  test("a folder that cannot be watched is rescanned on the timer, and said once", async () => {
    await mknod("ttyUSB0");
    const clock = new FakeClock();
    const lines: string[] = [];
    const g = group(["ttyUSB*"], {
      clock,
      rescanMs: 2_000,
      log: createLogger({ write: (l) => lines.push(l) }),
      fs: {
        stat: fakeStat,
        watch: () => {
          throw new Error("ENOSPC: inotify watch limit reached");
        },
      },
    });
    const lists = watchLists(g);
    await until("the first list", () => lists.length === 1);
    await mknod("ttyUSB1");
    clock.step(2_000);
    await until("the rescan's list", () => lists.length === 2);
    expect(lists[1]).toEqual(["ttyUSB0", "ttyUSB1"]);
    expect(clock.pending).toBe(1);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("Cannot watch a folder of host devices; rescanning it instead");
    expect(lines[0]).toContain("ENOSPC");
  });

  test("close() stops the watches and timers: no list comes after it", async () => {
    const clock = new FakeClock();
    const stopped: string[] = [];
    const g = group(["serial/by-id/*"], {
      clock,
      fs: { stat: fakeStat, watch: (d) => () => stopped.push(d) },
    });
    const lists = watchLists(g);
    await until("the first list", () => lists.length === 1);
    expect(clock.pending).toBe(2);
    g.close();
    expect(clock.pending).toBe(0);
    expect(stopped).toEqual([dir]);
    await mknod("serial/by-id/x");
    expect(await g.rescan()).toEqual([]);
    expect(lists).toHaveLength(1);
  });
});
