// Sysctl admission with the compiled agent on the test bed's containerd: a safe sysctl reaches the
// pod's network namespace; an unsafe one keeps its pod from running (SysctlForbidden) until the
// agent's config allows it, and then the pod's IPC namespace has the value. Needs root and the
// test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import { sysctlPodManifest } from "../lib/manifests.ts";
import { eventually } from "../lib/testbed.ts";

const agent = new TestAgent();

/** A pod on the pod network setting one sysctl, whose container prints it and sleeps. */
function sysctlPod(name: string, sysctl: string, value: string): string {
  const file = `/proc/sys/${sysctl.replaceAll(".", "/")}`;
  const print = `echo "$(cat ${file})"; exec sleep 3600`;
  return sysctlPodManifest(name, agent.tb.busybox, { [sysctl]: value }, print);
}

const running = (p: Pod) => p.status?.phase === "Running";
const full = (name: string) => `${name}-${agent.nodeName}`;

/** What the pod's container printed, once it printed something. */
function printed(name: string): Promise<string> {
  return eventually(`pod ${name} to print its sysctl`, async () => {
    const out = agent.cli(["logs", full(name)]).stdout.trim();
    return out === "" ? undefined : out;
  });
}

beforeAll(async () => {
  await agent.start();
}, 60_000);

afterAll(async () => {
  await agent.cleanup();
}, 60_000);

describe("sysctl admission (needs root and the test bed)", () => {
  test("a safe sysctl is set; an unsafe one is SysctlForbidden until allowedUnsafeSysctls allows it", async () => {
    agent.writeManifest(
      "safe.yaml",
      sysctlPod("safe", "net.ipv4.ip_local_port_range", "20000\t30000"),
    );
    agent.writeManifest("msg.yaml", sysctlPod("msg", "kernel.msgmax", "12345"));

    const rejected = await agent.waitPod("msg", "Failed", (p) => p.status?.phase === "Failed");
    const message = 'forbidden sysctl: "kernel.msgmax" not allowlisted';
    expect(rejected.status).toMatchObject({
      reason: "SysctlForbidden",
      message: `Pod was rejected: ${message}`,
    });
    const event = (await agent.events()).find((e) => e.reason === "SysctlForbidden");
    expect(event).toMatchObject({ type: "Warning", message });
    expect(event?.involvedObject.name).toBe(full("msg"));

    await agent.waitPod("safe", "Running", running);
    expect(await printed("safe")).toBe("20000\t30000");
    expect(agent.cli(["logs", full("msg")]).code).not.toBe(0);

    // The device allows the kernel.msg* group: after a restart with that config, the pod runs.
    await agent.stop();
    const config = join(agent.dir, "config.yaml");
    writeFileSync(config, 'allowedUnsafeSysctls: ["kernel.msg*"]\n');
    agent.args.push("--config", config);
    await agent.start();
    await agent.waitPod("msg", "Running", running);
    expect(await printed("msg")).toBe("12345");
    expect((await agent.pod("msg"))?.status?.reason).toBeUndefined();
  }, 90_000);
});
