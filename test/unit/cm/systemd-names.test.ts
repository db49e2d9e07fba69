// Cgroup names in systemd's form, as the kubelet's systemd driver writes them.
import { describe, expect, test } from "bun:test";
import {
  cgroupNameOfSlice,
  expandSlice,
  literalCgroupName,
  sliceName,
  systemdCgroupPath,
} from "../../../src/agent/cm/systemd-names.ts";

const UID = "5f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b";
const ESC = "5f0c1a2b_3c4d_4e5f_8a9b_0c1d2e3f4a5b";

describe("systemd slice names (no root)", () => {
  const names: [string, string, string][] = [
    ["/", "-.slice", "/"],
    ["/kubepods", "kubepods.slice", "/kubepods.slice"],
    ["/kubepods/burstable", "kubepods-burstable.slice", "/kubepods.slice/kubepods-burstable.slice"],
    [
      `/kubepods/besteffort/pod${UID}`,
      `kubepods-besteffort-pod${ESC}.slice`,
      `/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${ESC}.slice`,
    ],
    [`/kubepods/pod${UID}`, `kubepods-pod${ESC}.slice`, `/kubepods.slice/kubepods-pod${ESC}.slice`],
    [
      "kubepods//burstable/",
      "kubepods-burstable.slice",
      "/kubepods.slice/kubepods-burstable.slice",
    ],
    ["/fleet-pods", "fleet_pods.slice", "/fleet_pods.slice"],
  ];
  test.each(names)("%p is slice %p at %p, and reads back", (name, slice, path) => {
    expect(sliceName(name)).toBe(slice);
    expect(systemdCgroupPath(name)).toBe(path);
    const clean = `/${name.split("/").filter(Boolean).join("/")}`;
    expect(cgroupNameOfSlice(slice)).toBe(clean);
    expect(cgroupNameOfSlice(path)).toBe(clean);
  });

  test.each(["/kubepods/a_b", "/kubepods/../x"])("%p is refused, naming the level", (name) => {
    expect(() => sliceName(name)).toThrow("which a systemd slice cannot hold");
  });

  const notSlices = [".slice", "a.scope", "a/b.slice", "a--b.slice", "-a.slice", "a-.slice", ""];
  test.each(notSlices)("%p is not a slice name", (s) => {
    expect(() => expandSlice(s)).toThrow(`${JSON.stringify(s)} is not a systemd slice name`);
    expect(() => cgroupNameOfSlice(s)).toThrow("is not a systemd slice name");
  });
});

describe("slice paths read back only where they lie (no root)", () => {
  test("a slice's path under another parent is refused", () => {
    expect(() => cgroupNameOfSlice("/foo.slice/kubepods-burstable.slice")).toThrow(
      "(kubepods-burstable.slice lies at /kubepods.slice/kubepods-burstable.slice)",
    );
  });
});

test("a cgroup's literal name is its slice path under systemd and itself under cgroupfs (no root)", () => {
  expect(literalCgroupName("systemd", "/kubepods")).toBe("/kubepods.slice");
  expect(literalCgroupName("cgroupfs", "/kubepods")).toBe("/kubepods");
});
