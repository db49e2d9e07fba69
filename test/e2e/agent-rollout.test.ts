// An agent rollout over a small fleet, end to end with the compiled binaries: three agents, each
// under the launcher in a service loop, joined to a compiled hub. A release that exits at start
// (a tiny ELF, signed like any other) is rolled out with a canary of one: the canary's launcher
// rolls it back after three crashed starts, the device reports it, the rollout fails, and no
// other device is offered the release. A good release (the same code with another version
// stamped) is then rolled out to all three, one at a time, and every device runs it. The pods
// keep their containers throughout. Needs root, gcc and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { linkedVersion, updateDir } from "../../src/agent/update/install.ts";
import { TestAgent } from "../lib/agent.ts";
import { TestHub } from "../lib/hub.ts";
import { serviceCommand } from "../lib/launcher.ts";
import { sleeperManifest } from "../lib/manifests.ts";
import { eventually, fleetletBin, loadTestbed, repoRoot } from "../lib/testbed.ts";

const NEXT = "0.1.1-fleet";
const BROKEN = "0.1.2-broken";
const tb = loadTestbed();
const work = mkdtempSync(join(tmpdir(), "fleetlet-rollout-"));
const hub = new TestHub(["--heartbeat-interval", "1s", "--rollout-interval", "300ms"]);
const agentArgs = ["--hub-reconnect-back-off-base", "200ms", "--hub-reconnect-back-off-max", "2s"];
const agents = ["ra", "rb", "rc"].map(
  (n) =>
    new TestAgent({
      nodeName: `${n}${Math.random().toString(36).slice(2, 6)}`,
      args: [...agentArgs],
      command: serviceCommand(),
    }),
);

function run(args: string[], env: Record<string, string> = {}) {
  const p = Bun.spawnSync(args, {
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, ...env },
  });
  return { code: p.exitCode, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
}

function ok(args: string[], env: Record<string, string> = {}): string {
  const out = run(args, env);
  if (out.code !== 0) throw new Error(`${args.join(" ")}: ${out.stderr || out.stdout}`);
  return out.stdout;
}

const hubArgs = () => ["--hub", hub.url, "--token", hub.operatorToken];
const hubCli = (...args: string[]) => ok([fleetletBin, "hub", ...args, ...hubArgs()]);

interface NodeUpdate {
  node: string;
  running?: string;
  wanted?: string;
  phase?: string;
  reason?: string;
}

function updates(): Map<string, NodeUpdate> {
  const list = JSON.parse(hubCli("update", "status", "-o", "json")) as { items?: NodeUpdate[] };
  return new Map((list.items ?? []).map((u) => [u.node, u]));
}

interface RolloutView {
  phase: string;
  message: string;
  failed?: { node: string; message: string; rolledBack: boolean };
  nodes: { node: string; running?: string; from?: string; wanted?: string }[];
}

async function rollout(name: string): Promise<RolloutView> {
  const res = await hub.api(`/api/v1/agentrollouts/${name}`);
  expect(res.status).toBe(200);
  return (await res.json()) as RolloutView;
}

async function sleepers() {
  return Promise.all(
    agents.map((a) =>
      eventually(`${a.nodeName}'s sleeper to run`, async () => {
        const c = (await a.pod("keeps").catch(() => undefined))?.status?.containerStatuses?.[0];
        return c?.state.running !== undefined ? c : undefined;
      }),
    ),
  );
}

/** Signs `file` as `version` with the operator's key and pushes it to the hub. */
function release(file: string, version: string): void {
  ok([fleetletBin, "release", "sign", "--key", join(work, "ops.key"), "--version", version, file]);
  hubCli("release", "push", file, "--signature", `${file}.sig`);
}

beforeAll(async () => {
  const next = join(work, "fleetlet-next");
  ok([join(repoRoot, "scripts/build"), "--outfile", next], { FLEETLET_BUILD_VERSION: NEXT });
  // The broken release: an executable of the device's architecture that exits at start.
  writeFileSync(join(work, "broken.c"), "int main(void) { return 3; }\n");
  ok(["gcc", "-O2", "-static", "-o", join(work, "broken"), join(work, "broken.c")]);
  ok([fleetletBin, "release", "keygen", "--out", join(work, "ops")]);
  const trusted = readFileSync(join(work, "ops.pub"), "utf8").trim();
  writeFileSync(join(work, "config.yaml"), `updatePublicKeys: ["${trusted}"]\n`);
  await hub.start();
  release(next, NEXT);
  release(join(work, "broken"), BROKEN);
  for (const a of agents) {
    a.args.push("--config", join(work, "config.yaml"));
    a.args.push("--hub", hub.url, "--join-token", await hub.joinToken());
  }
  await Promise.all(agents.map((a) => a.start()));
  for (const a of agents) a.writeManifest("keeps.yaml", sleeperManifest("keeps", tb.busybox));
  await eventually(
    "three nodes on the hub",
    async () => {
      const list = (await (await hub.api("/api/v1/nodes")).json()) as {
        items: { metadata: { name: string } }[];
      };
      const names = new Set(list.items.map((n) => n.metadata.name));
      return agents.every((a) => names.has(a.nodeName)) || undefined;
    },
    30_000,
    500,
  );
}, 240_000);

afterAll(async () => {
  await Promise.all(
    agents.map(async (a) => {
      await a.stop();
      await a.cleanup();
    }),
  );
  await hub.cleanup();
  rmSync(work, { recursive: true, force: true });
}, 90_000);

describe("agent rollouts over three devices (needs root, gcc and the test bed)", () => {
  test("a canary that crashes at start is rolled back by its launcher; the rollout fails and no other device is offered the release", async () => {
    const before = await sleepers();
    const running = new Map(
      agents.map((a) => [a.nodeName, linkedVersion(updateDir(a.rootDir), "current")]),
    );
    hubCli("upgrade", "bad", "--version", BROKEN, "--canary", "1", "--max-unavailable", "1");
    const view = await eventually(
      "the rollout to fail",
      async () => {
        const v = await rollout("bad");
        return v.phase === "Failed" ? v : undefined;
      },
      120_000,
      500,
    );
    const canary = agents.find((a) => a.nodeName === view.failed?.node);
    expect(canary).toBeDefined();
    expect(view.failed?.message).toContain("rolled");
    expect(canary?.output).toContain(`crashed at start 3 times`);
    const status = run([
      fleetletBin,
      "rollout",
      "status",
      "agentrollout/bad",
      "--watch=false",
      ...hubArgs(),
    ]);
    expect(status.code).not.toBe(0);
    // No other device was offered it, and every device runs what it ran before.
    const u = updates();
    for (const a of agents) {
      expect(linkedVersion(updateDir(a.rootDir), "current")).toBe(running.get(a.nodeName));
      if (a === canary) continue;
      expect(u.get(a.nodeName)?.wanted).not.toBe(BROKEN);
      expect(a.output).not.toContain(BROKEN);
    }
    const after = await sleepers();
    for (const [i, c] of after.entries()) {
      expect(c.containerID).toBe(before[i]?.containerID);
      expect(c.restartCount).toBe(0);
    }
  }, 180_000);

  test("a good release rolls out to every device, one at a time; the pods keep their containers", async () => {
    const before = await sleepers();
    hubCli("upgrade", "delete", "bad");
    hubCli("upgrade", "good", "--version", NEXT, "--canary", "1", "--max-unavailable", "1");
    // rollout status waits for the end; meanwhile the rollout's view is sampled: never more than
    // one member sent the release and not yet healthy on it (maxUnavailable 1).
    const watch = Bun.spawn(
      [fleetletBin, "rollout", "status", "agentrollout/good", "--timeout", "4m", ...hubArgs()],
      { stdout: "pipe", stderr: "pipe" },
    );
    let inFlight = 0;
    let exited = false;
    void watch.exited.then(() => {
      exited = true;
    });
    while (!exited) {
      const { counts } = (await rollout("good")) as unknown as {
        counts: { updated: number; healthy: number };
      };
      inFlight = Math.max(inFlight, counts.updated - counts.healthy);
      await Bun.sleep(100);
    }
    const status = {
      code: await watch.exited,
      stdout: await new Response(watch.stdout).text(),
      stderr: await new Response(watch.stderr).text(),
    };
    expect(inFlight).toBe(1);
    expect(status.stderr).toBe("");
    expect(status.code).toBe(0);
    expect(status.stdout).toContain("successfully rolled out");
    const view = await rollout("good");
    expect(view.phase).toBe("Complete");
    const u = updates();
    for (const a of agents) {
      expect(u.get(a.nodeName)?.running).toBe(NEXT);
      expect(linkedVersion(updateDir(a.rootDir), "current")).toMatch(
        new RegExp(`^${NEXT}-[0-9a-f]{12}$`),
      );
    }
    const after = await sleepers();
    for (const [i, c] of after.entries()) {
      expect(c.containerID).toBe(before[i]?.containerID);
      expect(c.restartCount).toBe(0);
    }
  }, 300_000);
});
