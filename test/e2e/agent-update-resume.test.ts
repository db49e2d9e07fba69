// An agent update whose download is cut in the middle, end to end with the compiled binaries: the
// agent under the launcher reaches the compiled hub through a loopback proxy that passes the
// hub's bytes at 8 MiB/s and drops every connection once a third of the release went through.
// The agent says the download failed, tries again after its back-off, resumes from what it kept
// (HTTP range), verifies and installs the release, restarts into it on trial and is healthy; the
// pod keeps its container. Needs root and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TestAgent } from "../lib/agent.ts";
import { TestHub } from "../lib/hub.ts";
import { serviceCommand } from "../lib/launcher.ts";
import { sleeperManifest } from "../lib/manifests.ts";
import { eventually, loadTestbed } from "../lib/testbed.ts";
import { ThrottleProxy } from "../lib/throttle-proxy.ts";
import { hubCliOf, keepsRunning, signedBuild, updateStatusOf } from "../lib/update-e2e.ts";

const NEXT = "0.1.1-resume";
const tb = loadTestbed();
const work = mkdtempSync(join(tmpdir(), "fleetlet-update-resume-"));
const next = join(work, "fleetlet-next");
const hub = new TestHub(["--heartbeat-interval", "1s"]);
let proxy: ThrottleProxy;
const agentArgs = ["--hub-reconnect-back-off-base", "200ms", "--hub-reconnect-back-off-max", "2s"];
const agent = new TestAgent({ args: agentArgs, command: serviceCommand() });

const hubCli = hubCliOf(hub);
const updateStatus = () => updateStatusOf(hub, agent.nodeName);
const sleeper = () => keepsRunning(agent);

beforeAll(async () => {
  const config = signedBuild(work, next, NEXT);
  await hub.start();
  proxy = new ThrottleProxy({
    target: { hostname: "127.0.0.1", port: Number(new URL(hub.url).port) },
    bytesPerSecond: 8 * 1024 * 1024,
  });
  proxy.start();
  agentArgs.push("--config", config);
  agentArgs.push("--hub", `http://${proxy.host}`, "--join-token", await hub.joinToken());
  await agent.start();
  agent.writeManifest("keeps.yaml", sleeperManifest("keeps", tb.busybox));
}, 180_000);

afterAll(async () => {
  await agent.stop();
  await agent.cleanup();
  proxy?.stop();
  await hub.cleanup();
  rmSync(work, { recursive: true, force: true });
}, 60_000);

describe("an agent update over a link that drops (needs root and the test bed)", () => {
  test("the download cut at a third is resumed, not started over; the release is installed and healthy; the pod kept", async () => {
    const before = await sleeper();
    hubCli("release", "push", next, "--signature", `${next}.sig`);
    const { items } = JSON.parse(hubCli("release", "list", "-o", "json")) as {
      items: { compressedSize: number }[];
    };
    const compressed = items[0]?.compressedSize ?? 0;
    expect(compressed).toBeGreaterThan(10 * 1024 * 1024);
    const served = proxy.bytesServed;
    hubCli("update", agent.nodeName, "--version", NEXT);
    await eventually(
      "a third of the release through the link",
      () => proxy.bytesServed - served > compressed / 3 || undefined,
      60_000,
      20,
    );
    expect(proxy.cutAll()).toBeGreaterThan(0);
    const installed = await eventually(
      "the agent to install the release after the cut",
      () =>
        /agent update installed[^\n]*resumedFrom=(\d+) fetched=(\d+)/.exec(agent.output) ??
        undefined,
      90_000,
      200,
    );
    expect(agent.output).toMatch(/agent update failed; trying again later[^\n]*reason=interrupted/);
    const resumedFrom = Number(installed[1]);
    const fetched = Number(installed[2]);
    expect(resumedFrom).toBeGreaterThan(compressed / 4);
    expect(resumedFrom + fetched).toBe(compressed);
    const status = await eventually(
      "the device to report the update healthy",
      () => {
        const s = updateStatus();
        return s?.phase === "healthy" && s.running === NEXT ? s : undefined;
      },
      90_000,
      500,
    );
    expect(status.wanted).toBe(NEXT);
    const after = await sleeper();
    expect(after.containerID).toBe(before.containerID);
    expect(after.restartCount).toBe(0);
  }, 240_000);
});
