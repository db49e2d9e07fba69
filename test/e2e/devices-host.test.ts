// Host devices (the agent's hostDevices): device groups by path glob, served by the device manager
// as a built-in plugin. The compiled agent on the test bed, over device nodes made with mknod in a
// folder of its own; needs root and the test bed. The nodes have a major number no driver has
// (240, of the range left for local use), so opening one the device cgroup allows fails with
// "No such device or address" and one it refuses with "Operation not permitted": nothing real is
// touched.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import type { Node } from "../../src/api/node.ts";
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import { shellPodManifest } from "../lib/manifests.ts";
import { eventually } from "../lib/testbed.ts";

const RESOURCE = "fleetlet.io/serial";
const nodes = mkdtempSync("/tmp/fl-hd-");
const tty = (n: number) => join(nodes, `ttyTEST${n}`);

function mknod(path: string, minor: number): void {
  const p = Bun.spawnSync(["mknod", path, "c", "240", String(minor)], { stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`mknod ${path}: ${p.stderr.toString()}`);
}

const config = join(nodes, "agent.yaml");
const agent = new TestAgent({ args: ["--config", config] });

const held = (pod: Pod | undefined) =>
  pod?.status?.containerStatuses?.[0]?.allocatedResourcesStatus?.find((r) => r.name === RESOURCE)
    ?.resources ?? [];

async function node(): Promise<Node> {
  return (await (await agent.request(`/api/v1/nodes/${agent.nodeName}`)).json()) as Node;
}

async function devicesOf(): Promise<{ capacity?: string; allocatable?: string }> {
  const n = await node();
  return { capacity: n.status.capacity?.[RESOURCE], allocatable: n.status.allocatable?.[RESOURCE] };
}

const running = (p: Pod) => p.status?.phase === "Running";

beforeAll(async () => {
  mknod(tty(0), 0);
  mknod(tty(1), 1);
  // A node no glob matches: a pod may never open it.
  mknod(join(nodes, "other"), 9);
  // A stable name for ttyTEST0, as udev makes under /dev/serial/by-id: the same device.
  mkdirSync(join(nodes, "by-id"));
  symlinkSync("../ttyTEST0", join(nodes, "by-id", "usb-test-0"));
  await Bun.write(
    config,
    [
      `devicePluginPath: ${join(nodes, "plugins")}`,
      "hostDevices:",
      `  - name: ${RESOURCE}`,
      `    paths: ["${nodes}/ttyTEST*", "${nodes}/by-id/*"]`,
      "",
    ].join("\n"),
  );
  await agent.start();
}, 60_000);

afterAll(async () => {
  await agent.cleanup();
  rmSync(nodes, { recursive: true, force: true });
}, 60_000);

describe("host devices (needs root and the test bed)", () => {
  test("the node's capacity and allocatable count each matching device once, a stable name being the same device", async () => {
    await eventually("two serial devices in the node's status", async () => {
      const d = await devicesOf();
      return d.capacity === "2" && d.allocatable === "2";
    });
  }, 30_000);

  test("a pod asking for one gets one node at its own path, opens it, and is refused every other device by the device cgroup", async () => {
    // The container may make a node of the device it was not given: the device cgroup, not the
    // missing node, is what keeps it out.
    const script = [
      `ls -l ${tty(0)} ${tty(1)} 2>&1`,
      `cat ${tty(0)} 2>&1`,
      "mknod /tmp/other c 240 1 && cat /tmp/other 2>&1",
      "sleep 3600",
    ].join("; ");
    agent.writeManifest(
      "reader.yaml",
      shellPodManifest("reader", agent.tb.busybox, script, {
        resources: `{limits: {${RESOURCE}: 1}}`,
      }),
    );
    const pod = await agent.waitPod("reader", "Running", running);
    expect(held(pod)).toEqual([{ resourceID: tty(0), health: "Healthy" }]);
    const out = await eventually("the reader's output", async () => {
      const r = agent.cli(["logs", pod.metadata.name]);
      if (!r.stdout.includes("/tmp/other"))
        throw new Error(`logs so far: ${JSON.stringify(r.stdout + r.stderr)}`);
      return r.stdout;
    });
    // Its own node is there, with the host node's numbers; the other one is not.
    expect(out).toMatch(new RegExp(`^c.* 240, +0 .*${tty(0)}$`, "m"));
    expect(out).toContain(`${tty(1)}: No such file or directory`);
    expect(out).toContain(`can't open '${tty(0)}': No such device or address`);
    expect(out).toContain("can't open '/tmp/other': Operation not permitted");
    expect(agent.cli(["describe", "pod", pod.metadata.name]).stdout).toContain(
      `    Devices:\n      ${RESOURCE}:  ${tty(0)}\n`,
    );
  }, 60_000);

  test("a pod asking for more than is free fails with the kubelet's reason and message", async () => {
    agent.writeManifest(
      "greedy.yaml",
      shellPodManifest("greedy", agent.tb.busybox, "sleep 3600", {
        resources: `{limits: {${RESOURCE}: 2}}`,
      }),
    );
    const pod = await agent.waitPod("greedy", "Failed", (p) => p.status?.phase === "Failed");
    expect(pod.status?.reason).toBe("UnexpectedAdmissionError");
    expect(pod.status?.message).toBe(
      `Pod was rejected: Allocate failed due to requested number of devices unavailable for ${RESOURCE}. Requested: 2, Available: 1, which is unexpected`,
    );
    agent.removeManifest("greedy.yaml");
  }, 30_000);

  test("a device plugin folder that cannot be made leaves plugins out, not the agent", async () => {
    // A regular file where the folder's parent should be: mkdir fails as on a read-only root.
    const file = join(nodes, "not-a-folder");
    await Bun.write(file, "");
    const other = join(nodes, "other.yaml");
    await Bun.write(other, `devicePluginPath: ${file}/plugins\n`);
    const solo = new TestAgent({ args: ["--config", other] });
    try {
      await solo.start();
      await eventually("the agent to report it", async () =>
        solo.output.includes("cannot serve device plugin registration"),
      );
      solo.writeManifest("plain.yaml", shellPodManifest("plain", solo.tb.busybox, "sleep 3600"));
      await solo.waitPod("plain", "Running", running);
      expect(solo.proc?.exitCode).toBeNull();
    } finally {
      await solo.cleanup();
    }
  }, 60_000);

  test("a node appearing raises capacity within seconds; one unplugged under a pod is reported on it and stays held", async () => {
    mknod(tty(2), 2);
    await eventually("a third serial device", async () => (await devicesOf()).capacity === "3");
    unlinkSync(join(nodes, "by-id", "usb-test-0"));
    unlinkSync(tty(0));
    await eventually("the reader told its device is gone", async () =>
      (await agent.events()).some(
        (e) =>
          e.reason === "DeviceUnhealthy" &&
          e.involvedObject.name === `reader-${agent.nodeName}` &&
          e.message.includes(tty(0)),
      ),
    );
    // The pod goes on running; what it held is not handed to another pod.
    const d = await devicesOf();
    expect(d.allocatable).toBe("2");
    const reader = await agent.pod("reader");
    expect(reader?.status?.phase).toBe("Running");
    agent.writeManifest(
      "two.yaml",
      shellPodManifest("two", agent.tb.busybox, "sleep 3600", {
        resources: `{limits: {${RESOURCE}: 2}}`,
      }),
    );
    const two = await agent.waitPod("two", "Running", running);
    expect(held(two).map((r) => r.resourceID)).toEqual([tty(1), tty(2)]);
  }, 60_000);
});
