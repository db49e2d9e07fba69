// An agent update pushed from the hub, end to end with the compiled binaries: a "next" build
// (another version stamped) signed with the operator's key and pushed to the hub; the operator
// asks the device to take it; the agent, under the launcher in a service loop, verifies it with
// the key in its own config, downloads it with its node credential, installs it, restarts into
// it on trial, passes the trial and reports healthy; the hub sees the new version. The pod keeps
// its container throughout. A release signed with a key the device does not trust is refused,
// and the hub hears why. Needs root and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { linkedVersion, updateDir } from "../../src/agent/update/install.ts";
import { TestAgent } from "../lib/agent.ts";
import { TestHub } from "../lib/hub.ts";
import { serviceCommand } from "../lib/launcher.ts";
import { sleeperManifest } from "../lib/manifests.ts";
import { eventually, fleetletBin, loadTestbed } from "../lib/testbed.ts";
import { hubCliOf, keepsRunning, run, signedBuild, updateStatusOf } from "../lib/update-e2e.ts";

const NEXT = "0.1.1-e2e";
const tb = loadTestbed();
const work = mkdtempSync(join(tmpdir(), "fleetlet-update-hub-"));
const next = join(work, "fleetlet-next");
const hub = new TestHub(["--heartbeat-interval", "1s"]);
const agentArgs = ["--hub-reconnect-back-off-base", "200ms", "--hub-reconnect-back-off-max", "2s"];
const agent = new TestAgent({ args: agentArgs, command: serviceCommand() });

const hubCli = hubCliOf(hub);
const updateStatus = () => updateStatusOf(hub, agent.nodeName);
const sleeper = () => keepsRunning(agent);

beforeAll(async () => {
  const config = signedBuild(work, next, NEXT);
  await hub.start();
  agentArgs.push("--config", config);
  agentArgs.push("--hub", hub.url, "--join-token", await hub.joinToken());
  await agent.start();
  agent.writeManifest("keeps.yaml", sleeperManifest("keeps", tb.busybox));
}, 120_000);
afterAll(async () => {
  await agent.stop();
  await agent.cleanup();
  await hub.cleanup();
  rmSync(work, { recursive: true, force: true });
}, 60_000);

describe("agent updates from the hub (needs root and the test bed)", () => {
  test("the device takes the signed release the operator asks for: restarted into it on trial, healthy, the pod kept", async () => {
    const before = await sleeper();
    hubCli("release", "push", next, "--signature", `${next}.sig`);
    hubCli("update", agent.nodeName, "--version", NEXT);
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
    const dir = updateDir(agent.rootDir);
    expect(linkedVersion(dir, "current")).toMatch(new RegExp(`^${NEXT}-[0-9a-f]{12}$`));
    // The launcher looks for the agent's word every 0.2 s: it may say so just after the hub heard.
    await eventually(
      "the launcher to close the trial",
      () => new RegExp(`${NEXT}-[0-9a-f]{12} passed its trial`).test(agent.output) || undefined,
      10_000,
    );
    const after = await sleeper();
    expect(after.containerID).toBe(before.containerID);
    expect(after.restartCount).toBe(0);
  }, 180_000);

  test("a release signed with a key the device does not trust is refused, and the hub hears why", async () => {
    const other = join(work, "other");
    copyFileSync(next, other);
    run([fleetletBin, "release", "keygen", "--out", join(work, "rogue")]);
    const version = "0.1.2-e2e";
    run([
      fleetletBin,
      "release",
      "sign",
      "--key",
      join(work, "rogue.key"),
      "--version",
      version,
      other,
    ]);
    hubCli("release", "push", other, "--signature", `${other}.sig`);
    hubCli("update", agent.nodeName, "--version", version);
    const status = await eventually(
      "the refusal",
      () => {
        const s = updateStatus();
        return s?.phase === "refused" ? s : undefined;
      },
      30_000,
      500,
    );
    expect(status.reason).toBe("signature");
    expect(linkedVersion(updateDir(agent.rootDir), "current")).toMatch(new RegExp(`^${NEXT}-`));
  }, 60_000);
});
