// The compiled binary's first commands, run the way a user runs them. `runtime-info` needs root
// and the test bed (scripts/test starts it); the failure cases need neither.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fleetletBin, loadTestbed } from "../lib/testbed.ts";

const tmp = mkdtempSync(join(tmpdir(), "fleetlet-cli-e2e-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function run(args: string[], env: Record<string, string> = {}) {
  const started = performance.now();
  const p = Bun.spawnSync([fleetletBin, ...args], {
    env: { ...process.env, ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  return {
    code: p.exitCode,
    stdout: p.stdout.toString(),
    stderr: p.stderr.toString(),
    ms: performance.now() - started,
  };
}

describe("fleetlet version", () => {
  test("prints the version, the Bun version and the git commit", () => {
    const r = run(["version"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^fleetlet \d+\.\d+\.\d+/);
    expect(r.stdout).toContain(`bun:      ${Bun.version}`);
    expect(r.stdout).toMatch(/commit: +[0-9a-f]{7,}|commit: +unknown/);
  });

  test("an unknown command is a usage error with exit code 2", () => {
    const r = run(["frobnicate"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown command "frobnicate"');
  });
});

describe("fleetlet runtime-info", () => {
  test("prints containerd's name, version, API version and conditions (needs root and the test bed)", () => {
    const tb = loadTestbed();
    const r = run(["runtime-info", "--runtime-endpoint", tb.endpoint]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/Runtime: +containerd \S+/);
    expect(r.stdout).toMatch(/Runtime API: +v1/);
    expect(r.stdout).toContain(
      `Cgroup driver:   cgroupfs  (containerd's CRI config: runtime "runc" has SystemdCgroup = false)`,
    );
    expect(r.stdout).toMatch(/RuntimeReady +true/);
    expect(r.stdout).toMatch(/NetworkReady +true/);
  });

  test("-o json gives the same facts as JSON (needs root and the test bed)", () => {
    const tb = loadTestbed();
    const r = run(["runtime-info", "-o", "json"], { CONTAINER_RUNTIME_ENDPOINT: tb.endpoint });
    expect(r.code).toBe(0);
    const info = JSON.parse(r.stdout);
    expect(info.runtimeName).toBe("containerd");
    expect(info.cgroupDriver).toBe("cgroupfs");
    expect(info.conditions.map((c: { type: string }) => c.type).sort()).toEqual([
      "NetworkReady",
      "RuntimeReady",
    ]);
  });

  test("a socket path where nothing listens is one clear line and exit code 1", () => {
    const r = run(["runtime-info", "--runtime-endpoint", `unix://${tmp}/nothing.sock`]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    const lines = r.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`cannot reach the container runtime at unix://${tmp}/nothing.sock`);
    expect(r.stderr).not.toContain("    at ");
  });

  test("an endpoint that is not unix:// is refused naming the value", () => {
    const r = run(["runtime-info", "--runtime-endpoint", "tcp://127.0.0.1:1"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('"tcp://127.0.0.1:1"');
  });

  test("a runtime that accepts the connection but never answers ends at the deadline, not in a hang", async () => {
    const path = join(tmp, "silent.sock");
    const server: Server = createServer(() => {
      // accept and never answer
    });
    await new Promise<void>((resolve) => server.listen(path, resolve));
    try {
      const proc = Bun.spawn(
        [fleetletBin, "runtime-info", "--runtime-endpoint", `unix://${path}`, "--timeout", "1"],
        {
          stdout: "pipe",
          stderr: "pipe",
        },
      );
      const killer = setTimeout(() => proc.kill("SIGKILL"), 15_000);
      const code = await proc.exited;
      clearTimeout(killer);
      const stderr = await new Response(proc.stderr).text();
      expect(code).toBe(1);
      expect(stderr.trim().split("\n")).toHaveLength(1);
      expect(stderr).toContain("cannot reach the container runtime");
    } finally {
      server.close();
    }
  }, 20_000);

  test("an unknown flag is a usage error with exit code 2", () => {
    const r = run(["runtime-info", "--bogus"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--bogus");
  });
});
