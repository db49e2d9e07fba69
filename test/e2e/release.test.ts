// The release builds: scripts/release makes the x64 and arm64 executables and their Debian
// packages (test/e2e/deb-package.test.ts installs one), and the arm64 executable must run. It runs here under qemu-user (Debian's qemu-user-static with the arm64 C library, which
// scripts/setup installs), so a broken arm64 build cannot land: it prints its version, and as an
// agent it takes a pod through its life on the test bed's containerd (the host's kernel, runtime
// and images; the agent's own code is all arm64, emulated).
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import { sleeperManifest } from "../lib/manifests.ts";
import { eventually, repoRoot } from "../lib/testbed.ts";

const arm = join(repoRoot, "dist/fleetlet-linux-arm64");
let agent: TestAgent | undefined;
afterAll(() => agent?.cleanup(), 60_000);

describe("scripts/release", () => {
  test("builds x64 and arm64 executables, and the arm64 one prints its version under qemu", () => {
    const build = Bun.spawnSync([join(repoRoot, "scripts/release")], {
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(build.stderr.toString()).not.toContain("error");
    expect(build.exitCode).toBe(0);
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
  }, 300_000);

  test("packages each executable as fleetlet_<package.json version>_<arch>.deb", async () => {
    const version = (await Bun.file(join(repoRoot, "package.json")).json()).version as string;
    for (const [arch, machine] of [
      ["amd64", 0x3e],
      ["arm64", 0xb7],
    ] as const) {
      const deb = join(repoRoot, `dist/fleetlet_${version}_${arch}.deb`);
      const field = (name: string) =>
        Bun.spawnSync(["dpkg-deb", "--field", deb, name]).stdout.toString().trim();
      expect(field("Version")).toBe(version);
      expect(field("Architecture")).toBe(arch);
      // The packaged executable is the one for the package's architecture (ELF e_machine).
      const tar = Bun.spawnSync([
        "sh",
        "-c",
        'dpkg-deb --fsys-tarfile "$1" | tar -xO ./usr/bin/fleetlet | head -c 20',
        "sh",
        deb,
      ]);
      expect(tar.stdout[18]).toBe(machine);
    }
  }, 60_000);

  test("the arm64 build runs a pod's life as an agent under qemu (needs root and the test bed)", async () => {
    // About 16 times the CPU of the native build: its API answers in ~10 s here.
    agent = new TestAgent({ command: ["qemu-aarch64-static", arm], startTimeoutMs: 60_000 });
    await agent.start();
    const a = agent;
    agent.writeManifest("s.yaml", sleeperManifest("s", agent.tb.busybox));
    const running = await agent.waitPod(
      "s",
      "running",
      (p: Pod) => p.status?.containerStatuses?.[0]?.state?.running !== undefined,
      60_000,
    );
    expect(running.status?.phase).toBe("Running");
    const node = (await (await agent.request(`/api/v1/nodes/${agent.nodeName}`)).json()) as {
      status: { nodeInfo: { architecture: string } };
    };
    expect(node.status.nodeInfo.architecture).toBe("arm64");
    agent.removeManifest("s.yaml");
    await eventually("the pod to be gone", async () => (await a.pod("s")) === undefined, 60_000);
    expect(await a.stop()).toBe(0);
  }, 150_000);
});
