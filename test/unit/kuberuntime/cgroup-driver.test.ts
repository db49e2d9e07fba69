import { describe, expect, test } from "bun:test";
import {
  CgroupDriverMismatch,
  checkCgroupDriver,
} from "../../../src/agent/kuberuntime/cgroup-driver.ts";
import { createFakeRuntime } from "../../../src/cri/index.ts";
import { createLogger } from "../../../src/util/log.ts";

function setup(answer: "SYSTEMD" | "CGROUPFS" | undefined) {
  const logs: string[] = [];
  const rt = createFakeRuntime();
  rt.cgroupDriver = answer;
  return { rt, logs, logger: createLogger({ write: (line) => logs.push(line) }) };
}

describe("checkCgroupDriver at the agent's start", () => {
  test("the same driver as the agent's: goes on, says nothing", async () => {
    const { rt, logs, logger } = setup("CGROUPFS");
    await checkCgroupDriver({ cgroupDriver: "cgroupfs" }, rt, logger);
    expect(logs).toEqual([]);
  });

  test("a runtime on systemd under a cgroupfs agent: refused with one line saying what to change", async () => {
    const { rt, logger } = setup("SYSTEMD");
    const err = await checkCgroupDriver({ cgroupDriver: "cgroupfs" }, rt, logger).catch((e) => e);
    expect(err).toBeInstanceOf(CgroupDriverMismatch);
    expect(err.message).toBe(
      "the runtime uses the systemd cgroup driver (the runtime's RuntimeConfig: cgroup driver systemd) but the agent's cgroupDriver is cgroupfs: set cgroupDriver: \"systemd\" in the agent config, or SystemdCgroup = false in the runtime's runc options and restart it",
    );
    expect(err.message).not.toContain("\n");
  });

  test("a runtime on cgroupfs under a systemd agent: refused, the fix is the agent's config", async () => {
    const { rt, logger } = setup("CGROUPFS");
    const err = await checkCgroupDriver({ cgroupDriver: "systemd" }, rt, logger).catch((e) => e);
    expect(err).toBeInstanceOf(CgroupDriverMismatch);
    expect(err.message).toEndWith('set cgroupDriver: "cgroupfs" in the agent config');
  });

  test("a runtime that says nothing of its driver: goes on, and says so", async () => {
    const { rt, logs, logger } = setup(undefined);
    await checkCgroupDriver({ cgroupDriver: "cgroupfs" }, rt, logger);
    expect(logs.join("\n")).toContain("the runtime does not say its cgroup driver");
  });

  test("a runtime that is down at start: goes on (pods wait for it as always), with a warning", async () => {
    const { rt, logs, logger } = setup("SYSTEMD");
    rt.setUnavailable(true);
    await checkCgroupDriver({ cgroupDriver: "cgroupfs" }, rt, logger);
    expect(logs.join("\n")).toContain("cannot check the runtime's cgroup driver");
  });
});
