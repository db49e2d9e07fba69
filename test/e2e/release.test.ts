// The release builds: scripts/release makes the x64 and arm64 executables, and the arm64 one must
// run. It runs here under qemu-user (Debian's qemu-user-static with the arm64 C library, which
// scripts/setup installs), so a broken arm64 build cannot land.
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "../lib/testbed.ts";

describe("scripts/release", () => {
  test("builds x64 and arm64 executables, and the arm64 one prints its version under qemu", () => {
    const build = Bun.spawnSync([join(repoRoot, "scripts/release")], {
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(build.stderr.toString()).not.toContain("error");
    expect(build.exitCode).toBe(0);
    const arm = join(repoRoot, "dist/fleetlet-linux-arm64");
    expect(existsSync(join(repoRoot, "dist/fleetlet-linux-x64"))).toBe(true);
    const head = readFileSync(arm).subarray(0, 20);
    // ELF header: e_machine (offset 18, little endian) 0xB7 is AArch64.
    expect(Array.from(head.subarray(0, 4))).toEqual([0x7f, 0x45, 0x4c, 0x46]);
    expect(head[18]).toBe(0xb7);
    const run = Bun.spawnSync(["qemu-aarch64-static", arm, "version"], {
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(run.stderr.toString()).toBe("");
    expect(run.exitCode).toBe(0);
    expect(run.stdout.toString()).toContain("platform: linux/arm64");
    expect(run.stdout.toString()).toMatch(/^fleetlet \d+\.\d+\.\d+/);
  }, 180_000);
});
