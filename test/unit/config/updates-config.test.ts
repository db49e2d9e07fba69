// The agent config fields of agent updates: the trusted release keys (file only) and the
// download's bandwidth limit (file or flag), with clear errors naming the field. No root.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadAgentConfig } from "../../../src/agent/config/index.ts";
import { generateReleaseKeys } from "../../../src/release/keys.ts";

let dir: string;
const deps = { hostname: () => "pi", cwd: "/work" };
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "fleetlet-update-config-"));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

async function load(yaml: string, flags: string[] = []) {
  const file = join(dir, "config.yaml");
  await writeFile(file, yaml);
  return loadAgentConfig(["--config", file, ...flags], {}, deps);
}

describe("agent update settings in the agent config (no root)", () => {
  test("keys as keygen writes them, and the limit as a quantity, from the file or the flag", async () => {
    const { publicLine } = await generateReleaseKeys();
    const config = await load(`updatePublicKeys: ["${publicLine}"]\nupdateBandwidthLimit: 1Mi\n`);
    expect(config.updatePublicKeys).toEqual([publicLine]);
    expect(config.updateBandwidthLimit).toBe(1024 * 1024);
    expect((await load("", ["--update-bandwidth-limit", "256Ki"])).updateBandwidthLimit).toBe(
      256 * 1024,
    );
    expect((await load("updateBandwidthLimit: 0\n")).updateBandwidthLimit).toBe(0);
  });

  test("a key that is not one, or a limit that is not a quantity, is refused naming the field", async () => {
    await expect(load('updatePublicKeys: ["ed25519:abc"]\n')).rejects.toThrow(
      `updatePublicKeys.0: "ed25519:abc" must be "ed25519:" and the key's 32 bytes in base64`,
    );
    await expect(load("updateBandwidthLimit: fast\n")).rejects.toThrow(
      'updateBandwidthLimit: "fast" is not a quantity',
    );
  });
});
