// The compiled agent under the launcher (deploy/fleetlet-launch), restarted by a small service
// loop as systemd's Restart=always would: a second build installed as a new version (the layout
// an update leaves) runs on trial and passes it once healthy; a build that exits at start is
// rolled back by the launcher after three starts, and the agent it rolled back to reports it as
// a node event. The pod keeps running throughout: same container, no restart. Needs root and the
// test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { installVersion, linkedVersion, updateDir } from "../../src/agent/update/install.ts";
import { TestAgent } from "../lib/agent.ts";
import { restartServiceChild, serviceCommand } from "../lib/launcher.ts";
import { sleeperManifest } from "../lib/manifests.ts";
import { eventually, fleetletBin, loadTestbed } from "../lib/testbed.ts";

const tb = loadTestbed();
const agent = new TestAgent({ command: serviceCommand() });
let dir: string;

/** The executable as an update's download leaves it: a copy of `source` next to the versions. */
function downloaded(source: string): string {
  const file = join(agent.rootDir, `download-${Math.random().toString(36).slice(2)}`);
  copyFileSync(source, file);
  return file;
}

async function sleeper() {
  try {
    return await eventually("the sleeper to run", async () => {
      const pod = await agent.pod("keeps");
      const c = pod?.status?.containerStatuses?.[0];
      return c?.state.running !== undefined ? c : undefined;
    });
  } catch (err) {
    throw new Error(`${(err as Error).message}\nagent output:\n${agent.output.slice(-3000)}`);
  }
}

beforeAll(async () => {
  await agent.start();
  dir = updateDir(agent.rootDir);
  agent.writeManifest("keeps.yaml", sleeperManifest("keeps", tb.busybox));
}, 60_000);
afterAll(async () => {
  await agent.stop();
  await agent.cleanup();
}, 60_000);

describe("agent updates under the launcher (needs root and the test bed)", () => {
  test("a new build installed as a version runs on trial and passes it once healthy; the pod keeps its container", async () => {
    const before = await sleeper();
    installVersion(dir, "0.1.1-e2e000000001", downloaded(fleetletBin));
    restartServiceChild(agent);
    await eventually(
      "the trial to pass",
      () => agent.output.includes("0.1.1-e2e000000001 passed its trial") || undefined,
      60_000,
    );
    expect(agent.output).toMatch(/healthy on trial: told the launcher [^\n]*0\.1\.1-e2e000000001/);
    expect(existsSync(join(dir, "trial"))).toBe(false);
    expect(linkedVersion(dir, "current")).toBe("0.1.1-e2e000000001");
    const after = await sleeper();
    expect(after.containerID).toBe(before.containerID);
    expect(after.restartCount).toBe(0);
  }, 120_000);

  test("a build that exits at start is rolled back after three starts; the agent back reports it; the pod keeps its container", async () => {
    const before = await sleeper();
    const broken = join(agent.dir, "broken");
    writeFileSync(broken, "#!/bin/sh\necho broken build >&2\nexit 1\n", { mode: 0o755 });
    installVersion(dir, "0.1.2-e2e000000002", downloaded(broken));
    restartServiceChild(agent);
    await eventually(
      "the launcher to roll back",
      () =>
        agent.output.includes(
          "rolled back from 0.1.2-e2e000000002 to 0.1.1-e2e000000001: crashed at start 3 times",
        ) || undefined,
      60_000,
    );
    expect(agent.output.match(/broken build/g)?.length).toBe(3);
    expect(linkedVersion(dir, "current")).toBe("0.1.1-e2e000000001");
    const event = await eventually("the rollback's node event", async () =>
      (await agent.events().catch(() => [])).find((e) => e.reason === "AgentRolledBack"),
    );
    expect(event.type).toBe("Warning");
    expect(event.message).toBe(
      "The launcher rolled the agent back from 0.1.2-e2e000000002 to 0.1.1-e2e000000001: crashed at start 3 times",
    );
    const after = await sleeper();
    expect(after.containerID).toBe(before.containerID);
    expect(after.restartCount).toBe(0);
  }, 120_000);
});
