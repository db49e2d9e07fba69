import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { parseMountinfo } from "../../../src/agent/cm/mountinfo.ts";
import {
  type CollectorDeps,
  collectHealth,
  decodeThrottled,
  pickMounts,
} from "../../../src/agent/health/collect.ts";

let root: string;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "health-"));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

function put(path: string, text: string): void {
  mkdirSync(dirname(join(root, path)), { recursive: true });
  writeFileSync(join(root, path), text);
}

const MOUNTINFO = [
  "22 1 179:2 / / rw,relatime shared:1 - ext4 /dev/mmcblk0p2 rw",
  "23 22 0:5 / /proc rw - proc proc rw",
  "24 22 0:20 / /run rw - tmpfs tmpfs rw",
  "25 22 179:1 / /boot/firmware rw - vfat /dev/mmcblk0p1 rw",
  "26 22 8:1 / /mnt/usb\\040disk rw - ext4 /dev/sda1 rw",
  "27 22 179:2 /var/lib/x /srv/bind rw - ext4 /dev/mmcblk0p2 rw",
  "28 22 0:30 / /var/lib/fleetlet rw - tmpfs tmpfs rw",
  "29 22 0:31 / /run/containerd/x/rootfs rw - overlay overlay rw",
].join("\n");

function deps(over: Partial<CollectorDeps> = {}): CollectorDeps {
  return {
    root,
    paths: [],
    statfs: () => ({ bsize: 4096, blocks: 1000, bfree: 250, bavail: 200 }),
    addresses: () => new Map([["eth0", ["192.168.1.7/24", "fe80::1/64"]]]),
    ...over,
  };
}

describe("the health collector (fake /proc and /sys)", () => {
  test("reads temperatures, throttling, load, uptime, boot time, storage wear and interfaces", () => {
    put("sys/class/thermal/thermal_zone0/type", "cpu-thermal\n");
    put("sys/class/thermal/thermal_zone0/temp", "48312\n");
    put("sys/class/thermal/thermal_zone1/type", "broken\n");
    put("sys/class/thermal/thermal_zone1/temp", "not a number\n");
    put("sys/devices/platform/soc/soc:firmware/get_throttled", "50005\n");
    put("proc/loadavg", "0.52 0.31 0.12 1/123 4567\n");
    put("proc/uptime", "3600.25 7000.00\n");
    put("proc/stat", "cpu 1 2 3\nbtime 1700000000\nprocesses 9\n");
    put("sys/block/mmcblk0/device/life_time", "0x02 0x03\n");
    put("sys/block/mmcblk0/device/pre_eol_info", "0x01\n");
    put("sys/class/net/lo/operstate", "unknown\n");
    put("sys/class/net/veth12/operstate", "up\n");
    put("sys/class/net/eth0/operstate", "up\n");
    put("sys/class/net/eth0/statistics/rx_bytes", "123456\n");
    put("sys/class/net/eth0/statistics/tx_bytes", "654\n");
    const h = collectHealth(deps(), 1_700_000_123_000.4);
    expect(h).toEqual({
      collectedAt: 1_700_000_123_000,
      uptimeSeconds: 3600.25,
      bootTime: 1_700_000_000_000,
      load: [0.52, 0.31, 0.12],
      temperatures: [{ zone: "thermal_zone0", type: "cpu-thermal", celsius: 48.312 }],
      throttled: {
        raw: 0x50005,
        flags: ["under-voltage", "throttled", "under-voltage-occurred", "throttled-occurred"],
      },
      filesystems: [],
      storage: [{ device: "mmcblk0", lifeUsedPercent: 30, preEol: "normal" }],
      interfaces: [
        {
          name: "eth0",
          state: "up",
          addresses: ["192.168.1.7/24", "fe80::1/64"],
          rxBytes: 123456,
          txBytes: 654,
        },
      ],
    });
  });

  test("a board that says nothing gives empty lists and no optional facts", () => {
    expect(collectHealth(deps(), 5)).toEqual({
      collectedAt: 5,
      temperatures: [],
      filesystems: [],
      interfaces: [],
    });
  });

  test("reports the use of real mounts and of the agent's folders, from statfs", () => {
    put("proc/self/mountinfo", MOUNTINFO);
    const asked: string[] = [];
    const h = collectHealth(
      deps({
        paths: ["/var/lib/fleetlet/images"],
        statfs: (p) => {
          asked.push(p);
          return { bsize: 1024, blocks: 100, bfree: 40, bavail: 30 };
        },
      }),
      0,
    );
    expect(asked).toEqual(["/", "/boot/firmware", "/mnt/usb disk", "/var/lib/fleetlet"]);
    expect(h.filesystems[0]).toEqual({
      mountpoint: "/",
      device: "/dev/mmcblk0p2",
      fsType: "ext4",
      totalBytes: 102_400,
      usedBytes: 61_440,
      availableBytes: 30_720,
    });
  });

  test("a filesystem statfs cannot read, or with no blocks, is left out", () => {
    put("proc/self/mountinfo", MOUNTINFO);
    const h = collectHealth(
      deps({
        statfs: (p) =>
          p === "/"
            ? undefined
            : { bsize: 4096, blocks: p === "/boot/firmware" ? 0 : 1, bfree: 0, bavail: 0 },
      }),
      0,
    );
    expect(h.filesystems.map((f) => f.mountpoint)).toEqual(["/mnt/usb disk"]);
  });
});

describe("decodeThrottled", () => {
  test.each([
    ["0x0", []],
    ["0", []],
    ["0x80008", ["soft-temp-limit", "soft-temp-limit-occurred"]],
    ["20002", ["arm-frequency-capped", "arm-frequency-capped-occurred"]],
  ])("%s gives %p", (text, flags) => {
    expect(decodeThrottled(text)?.flags).toEqual(flags);
  });

  test.each(["", "zz", "0x123456789", "-1"])("refuses %p", (text) => {
    expect(decodeThrottled(text)).toBeUndefined();
  });
});

describe("pickMounts", () => {
  test("keeps one mount per filesystem and skips pseudo filesystems and bind mounts", () => {
    const picked = pickMounts(parseMountinfo(MOUNTINFO), []);
    expect(picked.map((m) => m.mountPoint)).toEqual(["/", "/boot/firmware", "/mnt/usb disk"]);
  });
});
