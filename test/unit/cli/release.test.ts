import { beforeAll, describe, expect, test } from "bun:test";
import { appendFileSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CliError, UsageError } from "../../../src/cli/errors.ts";
import type { CliIO } from "../../../src/cli/io.ts";
import { releaseCommand } from "../../../src/cli/release.ts";

function capture(): CliIO & { out: string[] } {
  const out: string[] = [];
  return { out, stdout: (t) => void out.push(t), stderr: () => {}, env: {}, now: () => 0 };
}

/** Runs the command; returns its exit code and its output, or the CliError's message. */
async function run(...argv: string[]): Promise<{ code: number; text: string }> {
  const io = capture();
  try {
    return { code: await releaseCommand(argv, io), text: io.out.join("") };
  } catch (err) {
    if (err instanceof CliError) return { code: err.exitCode, text: err.message };
    throw err;
  }
}

/** An AArch64 ELF header followed by some bytes: enough of an executable for sign and verify. */
function fakeArm64(path: string): void {
  const h = new Uint8Array(4096).map((_, i) => i % 256);
  h.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]);
  h.set([2, 0, 183, 0], 16);
  writeFileSync(path, h);
}

const dir = mkdtempSync(join(tmpdir(), "release-cli-"));
const exe = join(dir, "fleetlet");
beforeAll(async () => {
  fakeArm64(exe);
  expect((await run("keygen", "--out", join(dir, "k"))).code).toBe(0);
  expect((await run("keygen", "--out", join(dir, "other"))).code).toBe(0);
  expect((await run("sign", "--key", join(dir, "k.key"), "--version", "1.2.3", exe)).code).toBe(0);
});

describe("fleetlet release", () => {
  test("keygen writes the private key with mode 0600 and the public key line, and never overwrites them", async () => {
    expect(statSync(join(dir, "k.key")).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(dir, "k.pub"), "utf8")).toMatch(/^ed25519:[A-Za-z0-9+/]{43}=\n$/);
    const again = await run("keygen", "--out", join(dir, "k"));
    expect(again).toEqual({ code: 1, text: `${join(dir, "k.key")} exists: not overwritten` });
  });

  test("sign writes FILE.sig with the file's arch, size and sha256, and verify says it is good", async () => {
    const sig = readFileSync(`${exe}.sig`, "utf8");
    expect(sig).toContain("version: 1.2.3\narch: arm64\nsize: 4096\n");
    const r = await run("verify", "--public-key", join(dir, "k.pub"), `${exe}.sig`, exe);
    expect(r.code).toBe(0);
    expect(r.text).toMatch(
      /^good: .* release 1\.2\.3 for arm64, 4096 bytes, signed by ed25519:\S+\n$/,
    );
    const inline = readFileSync(join(dir, "k.pub"), "utf8").trim();
    expect(
      (await run("verify", "--public-key", inline, "--arch", "arm64", `${exe}.sig`)).code,
    ).toBe(0);
  });

  test("sign refuses an --arch that contradicts the ELF header, a bad version, and a file that is not ELF", async () => {
    const key = join(dir, "k.key");
    expect(await run("sign", "--key", key, "--version", "1", "--arch", "amd64", exe)).toEqual({
      code: 1,
      text: `--arch amd64 contradicts ${exe}, an arm64 executable`,
    });
    const bad = await run("sign", "--key", key, "--version", "1/2", exe);
    expect(bad.code).toBe(2);
    expect(bad.text).toContain('invalid version "1/2"');
    const script = join(dir, "script");
    writeFileSync(script, "#!/bin/sh\necho hi there, not an executable at all\n");
    expect(await run("sign", "--key", key, "--version", "1", script)).toEqual({
      code: 1,
      text: `${script} is not an ELF executable`,
    });
  });

  test("verify names what is wrong: unknown key, changed field, malformed line, arch, size, sha256", async () => {
    const pub = join(dir, "k.pub");
    const sig = readFileSync(`${exe}.sig`, "utf8");
    const write = (name: string, text: string | Uint8Array) => {
      writeFileSync(join(dir, name), text);
      return join(dir, name);
    };
    const changed = write("changed.sig", sig.replace("version: 1.2.3", "version: 1.2.4"));
    const malformed = write("malformed.sig", sig.replace("size: 4096", "size: 4k"));
    const copy = write("copy", readFileSync(exe));
    const tampered = readFileSync(exe);
    tampered[100] = (tampered[100] ?? 0) ^ 1;
    const cases: [string[], string][] = [
      [["--public-key", join(dir, "other.pub"), `${exe}.sig`], "bad signature"],
      [["--public-key", pub, changed], "bad signature"],
      [["--public-key", pub, malformed], "line 4: invalid size"],
      [["--public-key", pub, "--arch", "amd64", `${exe}.sig`], "arch mismatch"],
      [["--public-key", pub, `${exe}.sig`, write("tampered", tampered)], "sha256 mismatch"],
    ];
    appendFileSync(copy, "x");
    cases.push([["--public-key", pub, `${exe}.sig`, copy], "size mismatch"]);
    for (const [args, message] of cases) {
      const r = await run("verify", ...args);
      expect(r.code).toBe(1);
      expect(r.text).toContain(message);
      expect(r.text).not.toContain("\n");
    }
  });

  test("verify with a key file listing an old and a new key takes a manifest signed by either", async () => {
    const both = join(dir, "both.pub");
    writeFileSync(
      both,
      `${readFileSync(join(dir, "other.pub"), "utf8")}${readFileSync(join(dir, "k.pub"), "utf8")}`,
    );
    expect((await run("verify", "--public-key", both, `${exe}.sig`, exe)).code).toBe(0);
  });

  test("a missing argument or an unknown verb is a usage error (exit 2)", async () => {
    expect((await run("sign", "--version", "1", exe)).code).toBe(2);
    expect((await run("verify", `${exe}.sig`)).code).toBe(2);
    expect((await run("publish")).code).toBe(2);
    expect(await run("--help")).toMatchObject({ code: 0 });
    await expect(releaseCommand(["keygen"], capture())).rejects.toThrow(UsageError);
  });
});
