import { describe, expect, test } from "bun:test";
import {
  cpuMaxText,
  detectCgroupLayout,
  limitText,
  milliCPUToQuota,
  milliCPUToShares,
  parseCpuMax,
  parsePressure,
  sharesToWeightLinear,
  sharesToWeightQuadratic,
  weightMatchesShares,
} from "../../../src/agent/cm/index.ts";

describe("cpu conversions", () => {
  test("milliCPUToShares() and milliCPUToQuota() follow kubelet", () => {
    expect([0, 1, 2, 100, 250, 1000, 300_000].map(milliCPUToShares)).toEqual([
      2, 2, 2, 102, 256, 1024, 262_144,
    ]);
    expect([0, 1, 5, 10, 100, 1500].map((m) => milliCPUToQuota(m))).toEqual([
      0, 1000, 1000, 1000, 10_000, 150_000,
    ]);
    expect(milliCPUToQuota(500, 50_000)).toBe(25_000);
  });

  const table: [number, number, number][] = [
    // shares, linear weight, quadratic weight
    [2, 1, 1],
    [102, 4, 17],
    [1024, 39, 100],
    [2048, 79, 174],
    [262_144, 10_000, 10_000],
  ];
  for (const [shares, linear, quadratic] of table) {
    test(`cpu.weight of ${shares} shares is ${linear} (linear) or ${quadratic} (quadratic)`, () => {
      expect(sharesToWeightLinear(shares)).toBe(linear);
      expect(sharesToWeightQuadratic(shares)).toBe(quadratic);
      expect(weightMatchesShares(linear, shares)).toBe(true);
      expect(weightMatchesShares(quadratic, shares)).toBe(true);
    });
  }

  test("weightMatchesShares() refuses a weight neither formula gives", () => {
    expect(weightMatchesShares(50, 1024)).toBe(false);
  });

  test("cpu.max, memory.max and pids.max texts", () => {
    expect(cpuMaxText(50_000, 100_000)).toBe("50000 100000");
    expect(cpuMaxText(0, 100_000)).toBe("max 100000");
    expect(cpuMaxText(undefined, undefined)).toBe("max 100000");
    expect(parseCpuMax("max 100000")).toEqual({ periodUs: 100_000 });
    expect(parseCpuMax("25000 50000\n")).toEqual({ quotaUs: 25_000, periodUs: 50_000 });
    expect(() => parseCpuMax("x")).toThrow("cpu.max");
    expect(limitText(67_108_864)).toBe("67108864");
    expect(limitText(-1)).toBe("max");
  });

  test("parsePressure() reads avg10 and total of some and full", () => {
    const psi = parsePressure(
      "some avg10=1.50 avg60=0.00 avg300=0.00 total=123\nfull avg10=0.25 avg60=0 avg300=0 total=7\n",
    );
    expect(psi).toEqual({ some: { avg10: 1.5, total: 123 }, full: { avg10: 0.25, total: 7 } });
  });
});

describe("detectCgroupLayout()", () => {
  const hybrid = `30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
38 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw`;

  test("a hybrid host is v1, with its controllers and the cgroup2 mount", () => {
    const layout = detectCgroupLayout(hybrid);
    expect(layout.version).toBe(1);
    if (layout.version !== 1) return;
    expect(layout.controllers.get("cpu")).toBe("/sys/fs/cgroup/cpu,cpuacct");
    expect(layout.controllers.get("cpuacct")).toBe("/sys/fs/cgroup/cpu,cpuacct");
    expect(layout.controllers.get("memory")).toBe("/sys/fs/cgroup/memory");
    expect(layout.controllers.get("name=systemd")).toBe("/sys/fs/cgroup/systemd");
    expect(layout.controllers.has("xattr")).toBe(false);
    expect(layout.unified).toBe("/sys/fs/cgroup/unified");
  });

  test("a cgroup2 mount at /sys/fs/cgroup alone is v2", () => {
    const v2 = "25 22 0:23 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate";
    expect(detectCgroupLayout(v2)).toEqual({ version: 2, mountPoint: "/sys/fs/cgroup" });
  });

  test("no cgroup mount at all is an error saying so", () => {
    expect(() => detectCgroupLayout("1 0 8:1 / / rw - ext4 /dev/sda1 rw\ngarbage")).toThrow(
      "no cgroup hierarchy is mounted",
    );
  });
});
