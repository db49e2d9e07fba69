import { describe, expect, test } from "bun:test";
import {
  containerdConfig,
  createFakeRuntime,
  driverFromContainerdConfig,
  runtimeCgroupDriver,
} from "../../../src/cri/index.ts";

/** containerd 1.6's CRI config as its verbose Status gives it, cut to what matters here. */
function config(systemd: unknown, extra: Record<string, unknown> = {}) {
  return {
    containerd: {
      defaultRuntimeName: "runc",
      runtimes: {
        runc: { runtimeType: "io.containerd.runc.v2", options: { SystemdCgroup: systemd } },
      },
    },
    systemdCgroup: false,
    ...extra,
  };
}

describe("driverFromContainerdConfig", () => {
  const cases: [string, Record<string, unknown>, string | undefined][] = [
    ["runc's SystemdCgroup = true", config(true), "systemd"],
    ["runc's SystemdCgroup = false", config(false), "cgroupfs"],
    ["no SystemdCgroup option (containerd's default)", config(undefined), "cgroupfs"],
    ['a string "true" is not the boolean containerd writes', config("true"), "cgroupfs"],
    ["the old top-level systemd_cgroup", config(false, { systemdCgroup: true }), "systemd"],
    ["no default runtime named", { containerd: { runtimes: {} } }, undefined],
    [
      "a default runtime that is not among the runtimes",
      { containerd: { defaultRuntimeName: "crun", runtimes: {} } },
      undefined,
    ],
    [
      "a runtime named like an Object property is not found through the prototype",
      { containerd: { defaultRuntimeName: "constructor", runtimes: {} } },
      undefined,
    ],
    ["no containerd section", {}, undefined],
  ];
  for (const [what, cfg, want] of cases)
    test(what, () => expect(driverFromContainerdConfig(cfg)?.driver).toBe(want as never));

  test("the source names the runtime and its option, for the user's fix", () => {
    expect(driverFromContainerdConfig(config(true))?.source).toBe(
      `containerd's CRI config: runtime "runc" has SystemdCgroup = true`,
    );
  });
});

describe("runtimeCgroupDriver", () => {
  test("RuntimeConfig's answer comes first (containerd 2.x), without a Status", async () => {
    const rt = createFakeRuntime();
    rt.cgroupDriver = "SYSTEMD";
    rt.statusInfo = { config: JSON.stringify(config(false)) };
    expect((await runtimeCgroupDriver(rt))?.driver).toBe("systemd");
    rt.cgroupDriver = "CGROUPFS";
    expect((await runtimeCgroupDriver(rt))?.driver).toBe("cgroupfs");
    expect(rt.callsOf("status")).toEqual([]);
  });

  test("UNIMPLEMENTED RuntimeConfig (containerd 1.x): the verbose Status's config says", async () => {
    const rt = createFakeRuntime();
    rt.statusInfo = { config: JSON.stringify(config(true)) };
    expect(await runtimeCgroupDriver(rt)).toEqual({
      driver: "systemd",
      source: `containerd's CRI config: runtime "runc" has SystemdCgroup = true`,
    });
    expect(rt.callsOf("status")).toEqual([{ verbose: true }]);
  });

  test("a runtime that says neither: undefined", async () => {
    const rt = createFakeRuntime();
    expect(await runtimeCgroupDriver(rt)).toBeUndefined();
    rt.statusInfo = { config: "not json" };
    expect(await runtimeCgroupDriver(rt)).toBeUndefined();
    rt.statusInfo = { config: "[1,2]" };
    expect(await containerdConfig(rt)).toBeUndefined();
  });

  test("a runtime that does not answer: the error, not a guess", async () => {
    const rt = createFakeRuntime();
    rt.setUnavailable(true);
    await expect(runtimeCgroupDriver(rt)).rejects.toThrow(/fake runtime is down/);
  });
});
