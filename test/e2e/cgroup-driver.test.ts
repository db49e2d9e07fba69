// The agent asks the runtime how it makes cgroups and refuses to start when the runtime's way is
// not its own, with one line saying what to change: a containerd 1.6 whose runc runs with
// SystemdCgroup = true (its verbose Status gives its config; its RuntimeConfig is UNIMPLEMENTED).
// Needs root and the test bed.
import { afterAll, describe, expect, test } from "bun:test";
import { TestAgent } from "../lib/agent.ts";
import { SmallContainerd } from "../lib/small-containerd.ts";

const runtime = new SmallContainerd(32, { tmpfs: true, systemdCgroup: true });
const agent = new TestAgent({ endpoint: runtime.endpoint });

afterAll(async () => {
  await agent.cleanup();
  await runtime.stop();
}, 60_000);

describe("the runtime's cgroup driver at the agent's start (needs root and the test bed)", () => {
  test("a containerd with SystemdCgroup = true under a cgroupfs agent: the agent exits 1 with one line", async () => {
    await runtime.start();
    const proc = Bun.spawn(agent.argv(), { stdout: "pipe", stderr: "pipe" });
    const [code, stderr] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
    expect(code).toBe(1);
    const line = stderr.split("\n").find((l) => l.includes("cgroup driver")) ?? stderr;
    expect(line).toContain(
      `the runtime uses the systemd cgroup driver (containerd's CRI config: runtime "runc" has SystemdCgroup = true) but the agent's cgroupDriver is cgroupfs: set cgroupDriver: "systemd" in the agent config, or SystemdCgroup = false in the runtime's runc options and restart it`,
    );
  }, 30_000);
});
