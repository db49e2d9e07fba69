// What the agent update e2e tests share: the CLI run to its end, the hub's CLI with the operator
// token, a device's update as the hub shows it, the pod that must keep running, and a second
// build of fleetlet with another version, signed with a new operator key that the device's
// config trusts.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { TestAgent } from "./agent.ts";
import type { TestHub } from "./hub.ts";
import { eventually, fleetletBin, repoRoot } from "./testbed.ts";

/** Runs `args` to the end; its stdout, or an error with what it said. */
export function run(args: string[], env: Record<string, string> = {}): string {
  const p = Bun.spawnSync(args, {
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, ...env },
  });
  const stdout = p.stdout.toString();
  if (p.exitCode !== 0) throw new Error(`${args.join(" ")}: ${p.stderr.toString() || stdout}`);
  return stdout;
}

/** `fleetlet hub ARGS --hub URL --token T` against `hub`. */
export const hubCliOf =
  (hub: TestHub) =>
  (...args: string[]): string =>
    run([fleetletBin, "hub", ...args, "--hub", hub.url, "--token", hub.operatorToken]);

/** Node `node`'s update as `fleetlet hub update status NODE -o json` shows it. */
export function updateStatusOf(hub: TestHub, node: string): Record<string, unknown> | undefined {
  const out = JSON.parse(hubCliOf(hub)("update", "status", node, "-o", "json")) as {
    items?: Record<string, unknown>[];
  };
  return out.items?.[0];
}

/** The running container of `agent`'s pod "keeps" (waited for). */
export function keepsRunning(agent: TestAgent) {
  return eventually("the sleeper to run", async () => {
    const c = (await agent.pod("keeps").catch(() => undefined))?.status?.containerStatuses?.[0];
    return c?.state.running !== undefined ? c : undefined;
  });
}

/** Builds fleetlet as `version` into `file`, signs it with a new key in `work` (ops.key,
 * ops.pub), and writes `work`/config.yaml trusting that key; returns the config's path. */
export function signedBuild(work: string, file: string, version: string): string {
  run([join(repoRoot, "scripts/build"), "--outfile", file], { FLEETLET_BUILD_VERSION: version });
  run([fleetletBin, "release", "keygen", "--out", join(work, "ops")]);
  run([fleetletBin, "release", "sign", "--key", join(work, "ops.key"), "--version", version, file]);
  const trusted = readFileSync(join(work, "ops.pub"), "utf8").trim();
  const config = join(work, "config.yaml");
  writeFileSync(config, `updatePublicKeys: ["${trusted}"]\n`);
  return config;
}
