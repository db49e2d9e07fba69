// `fleetlet release keygen|sign|verify` through the compiled binary, on a copy of that binary
// itself (a real ~100 MB executable, as an operator signs it): the key files and their modes,
// the manifest, a good verify, and each refusal with exit 1 and one line on stderr. Needs
// dist/fleetlet (scripts/build); no root, no test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fleetletBin } from "../lib/testbed.ts";

const dir = mkdtempSync(join(tmpdir(), "release-sign-"));
const exe = join(dir, "fleetlet");
const ownArch = process.arch === "x64" ? "amd64" : "arm64";

function cli(...args: string[]) {
  const p = Bun.spawnSync([fleetletBin, "release", ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
}

beforeAll(() => {
  copyFileSync(fleetletBin, exe);
  expect(cli("keygen", "--out", join(dir, "ops")).code).toBe(0);
  expect(cli("keygen", "--out", join(dir, "other")).code).toBe(0);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("fleetlet release (compiled)", () => {
  test("fleetlet --help lists the release command", () => {
    const p = Bun.spawnSync([fleetletBin, "--help"], { stdout: "pipe" });
    expect(p.stdout.toString()).toMatch(/\n {2}release {8}sign agent releases offline/);
  });

  test("keygen writes a 0600 PKCS #8 key that openssl reads, and the public line", () => {
    expect(statSync(join(dir, "ops.key")).mode & 0o777).toBe(0o600);
    const o = Bun.spawnSync(["openssl", "pkey", "-in", join(dir, "ops.key"), "-noout", "-text"]);
    expect(o.exitCode).toBe(0);
    expect(o.stdout.toString()).toStartWith("ED25519 Private-Key:");
    expect(readFileSync(join(dir, "ops.pub"), "utf8")).toMatch(/^ed25519:[A-Za-z0-9+/]{43}=\n$/);
  });

  test("sign writes the manifest of the binary, and verify says it is good in one line", () => {
    const s = cli("sign", "--key", join(dir, "ops.key"), "--version", "0.2.0", exe);
    expect(s.stderr).toBe("");
    expect(s.code).toBe(0);
    const size = statSync(exe).size;
    const hash = new Bun.CryptoHasher("sha256").update(readFileSync(exe)).digest("hex");
    expect(readFileSync(`${exe}.sig`, "utf8")).toMatch(
      new RegExp(
        `^fleetlet-release: 1\nversion: 0\\.2\\.0\narch: ${ownArch}\nsize: ${size}\nsha256: ${hash}\nsignature: [A-Za-z0-9+/]{86}==\n$`,
      ),
    );
    const v = cli("verify", "--public-key", join(dir, "ops.pub"), `${exe}.sig`, exe);
    expect(v.code).toBe(0);
    expect(v.stdout.split("\n")).toHaveLength(2);
    expect(v.stdout).toContain(`release 0.2.0 for ${ownArch}, ${size} bytes`);
  });

  test("sign refuses an --arch that contradicts the binary and a bad version", () => {
    const other = ownArch === "amd64" ? "arm64" : "amd64";
    const a = cli("sign", "--key", join(dir, "ops.key"), "--version", "1", "--arch", other, exe);
    expect(a.code).toBe(1);
    expect(a.stderr).toBe(
      `fleetlet: --arch ${other} contradicts ${exe}, an ${ownArch} executable\n`,
    );
    const v = cli("sign", "--key", join(dir, "ops.key"), "--version", "a b", exe);
    expect(v.code).toBe(2);
    expect(v.stderr).toStartWith('fleetlet: invalid version "a b"');
  });

  test("verify refuses another key, a changed manifest and a changed binary, each in one line", () => {
    const sig = readFileSync(`${exe}.sig`, "utf8");
    const changed = join(dir, "changed.sig");
    writeFileSync(changed, sig.replace("version: 0.2.0", "version: 0.2.9"));
    const broken = join(dir, "broken.sig");
    writeFileSync(broken, sig.replace("arch: ", "arch:"));
    const tampered = join(dir, "tampered");
    const bytes = readFileSync(exe);
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] ?? 0) ^ 1;
    writeFileSync(tampered, bytes);
    const pub = join(dir, "ops.pub");
    for (const [args, message] of [
      [["--public-key", join(dir, "other.pub"), `${exe}.sig`], "bad signature"],
      [["--public-key", pub, changed], "bad signature"],
      [["--public-key", pub, broken], "line 3"],
      [["--public-key", pub, `${exe}.sig`, tampered], "sha256 mismatch"],
    ] as const) {
      const r = cli("verify", ...args);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(message);
      expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
    }
  });
});
