// The agent taking an update: refused without the launcher or a key, for a manifest signed with
// another key or for another arch, before a byte is fetched; otherwise downloaded from a
// loopback server serving the gzip'd release and installed on trial; the running version is
// not fetched again. No root.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DownloadError } from "../../../../src/agent/update/errors.ts";
import { linkedVersion } from "../../../../src/agent/update/install.ts";
import { takeUpdate, UpdateRefused, type UpdateTaker } from "../../../../src/agent/update/take.ts";
import { takeRollback } from "../../../../src/agent/update/trial.ts";
import {
  generateReleaseKeys,
  parsePublicKey,
  readPrivateKey,
  signRelease,
} from "../../../../src/release/keys.ts";
import { FakeClock } from "../../../../src/util/clock.ts";
import { ReleaseServer } from "../../../lib/release-server.ts";

const release = new TextEncoder().encode(`#!/bin/sh\necho new\n${"x".repeat(200_000)}\n`);
const sha256 = createHash("sha256").update(release).digest("hex");
let dir: string;
let server: ReleaseServer;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), "fleetlet-take-"));
  server = await ReleaseServer.start(Bun.gzipSync(release));
});
afterEach(async () => {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function signed(arch: "amd64" | "arm64" = "amd64") {
  const keys = await generateReleaseKeys();
  const { text } = await signRelease(await readPrivateKey(keys.privatePem), {
    version: "0.2.0",
    arch,
    size: release.length,
    sha256,
  });
  return { text, key: await parsePublicKey(keys.publicLine) };
}

async function taker(over: Partial<UpdateTaker> = {}): Promise<UpdateTaker> {
  return { dir, keys: [], arch: "amd64", launched: true, ...over };
}

describe("taking an update (no root)", () => {
  test("a signed release for this arch is downloaded and installed on trial; the same again fetches nothing", async () => {
    const { text, key } = await signed();
    const t = await taker({ keys: [key] });
    const got = await takeUpdate(t, { manifest: text, url: server.url });
    const name = `0.2.0-${sha256.slice(0, 12)}`;
    expect(got).toMatchObject({ name, already: false, resumedFrom: 0 });
    expect(readFileSync(join(dir, "versions", name, "fleetlet"))).toEqual(Buffer.from(release));
    expect(readFileSync(join(dir, "trial"), "utf8")).toBe(`${name} 0\n`);
    expect(linkedVersion(dir, "current")).toBe(name);
    const served = server.served;
    expect(await takeUpdate(t, { manifest: text, url: server.url })).toMatchObject({
      already: true,
    });
    expect(server.served).toBe(served);
  });

  test("refusals come before any byte is fetched, each with its reason", async () => {
    const { text, key } = await signed();
    const other = (await signed()).key;
    const arm = await signed("arm64");
    const cases: [Partial<UpdateTaker>, string, string][] = [
      [{ keys: [key], launched: false }, text, "no-launcher"],
      [{ keys: [] }, text, "no-keys"],
      [{ keys: [other] }, text, "signature"],
      [{ keys: [arm.key] }, arm.text, "arch"],
      [{ keys: [key] }, text.replace("version: 0.2.0", "version: 0.2.1"), "signature"],
      [{ keys: [key] }, "fleetlet-release: 2\n", "malformed"],
    ];
    for (const [over, manifest, reason] of cases) {
      const err = await takeUpdate(await taker(over), { manifest, url: server.url }).catch(
        (e) => e,
      );
      expect(err).toBeInstanceOf(UpdateRefused);
      expect(err.reason).toBe(reason);
    }
    expect(server.served).toBe(0);
    expect(linkedVersion(dir, "current")).toBeUndefined();
  });

  test("a release the launcher rolled this device back from is remembered and refused before a byte is fetched", async () => {
    const { text, key } = await signed();
    const name = `0.2.0-${sha256.slice(0, 12)}`;
    writeFileSync(
      join(dir, "rolled-back"),
      `from=${name} to=packaged reason=crashed at start 3 times\n`,
    );
    expect(takeRollback(dir)).toEqual({
      from: name,
      to: "packaged",
      reason: "crashed at start 3 times",
    });
    const err = await takeUpdate(await taker({ keys: [key] }), {
      manifest: text,
      url: server.url,
    }).catch((e) => e);
    expect(err).toBeInstanceOf(UpdateRefused);
    expect(err.reason).toBe("rolled-back");
    expect(err.message).toBe(
      `the launcher rolled this device back from ${name} before (crashed at start 3 times): it does not take that release again`,
    );
    expect(server.served).toBe(0);
    // A second rollback is remembered after the first, each by its release folder.
    writeFileSync(
      join(dir, "rolled-back"),
      "from=0.2.0-000000000000 to=packaged reason=trial timed out\n",
    );
    takeRollback(dir);
    const other = join(dir, "rolled-back-from");
    expect(readFileSync(other, "utf8")).toBe(
      `${name} crashed at start 3 times\n0.2.0-000000000000 trial timed out\n`,
    );
  });

  test("after a cut later than the download, the verified download is installed without a fetch", async () => {
    const { text, key } = await signed();
    const downloads = join(dir, "download");
    mkdirSync(downloads, { recursive: true });
    writeFileSync(join(downloads, `${sha256}.bin`), release);
    // An abandoned release's part and unfinished output are removed, durably, before anything else.
    writeFileSync(join(downloads, `${"a".repeat(64)}.part`), "old");
    writeFileSync(join(downloads, `${"a".repeat(64)}.bin.tmp`), "old");
    const got = await takeUpdate(await taker({ keys: [key] }), { manifest: text, url: server.url });
    const name = `0.2.0-${sha256.slice(0, 12)}`;
    expect(got).toEqual({ name, already: false, resumedFrom: 0, fetched: 0, reused: "download" });
    expect(server.served).toBe(0);
    expect(readFileSync(join(dir, "versions", name, "fleetlet"))).toEqual(Buffer.from(release));
    expect(linkedVersion(dir, "current")).toBe(name);
    expect(readdirSync(downloads)).toEqual([]);
  });

  test("after a cut during the install, the version's verified executable is used again; a wrong one is fetched anew", async () => {
    const { text, key } = await signed();
    const name = `0.2.0-${sha256.slice(0, 12)}`;
    const exe = join(dir, "versions", name, "fleetlet");
    mkdirSync(join(dir, "versions", name), { recursive: true });
    writeFileSync(exe, release);
    const t = await taker({ keys: [key] });
    expect(await takeUpdate(t, { manifest: text, url: server.url })).toMatchObject({
      reused: "version",
      fetched: 0,
    });
    expect(server.served).toBe(0);
    expect(readFileSync(join(dir, "trial"), "utf8")).toBe(`${name} 0\n`);
    expect(linkedVersion(dir, "current")).toBe(name);
    // The same size with other bytes (a torn write) is not trusted: the release is fetched.
    rmSync(join(dir, "current"));
    writeFileSync(exe, Buffer.alloc(release.length, 0x78));
    const again = await takeUpdate(t, { manifest: text, url: server.url });
    expect(again.reused).toBeUndefined();
    expect(server.served).toBeGreaterThan(0);
    expect(readFileSync(exe)).toEqual(Buffer.from(release));
    expect(existsSync(join(dir, "download", `${sha256}.part`))).toBe(false);
  });

  test("while the launcher has not closed the trial this agent passed (healthy is there), nothing is fetched or installed", async () => {
    const { text, key } = await signed();
    const clock = new FakeClock();
    writeFileSync(join(dir, "healthy"), "0.1.0-aaaaaaaaaaaa\n");
    const t = await taker({ keys: [key], clock });
    let settled = false;
    const taking = takeUpdate(t, { manifest: text, url: server.url }).finally(() => {
      settled = true;
    });
    for (let i = 0; i < 10; i++) {
      clock.step(200);
      await Bun.sleep(1);
    }
    expect(settled).toBe(false);
    expect(server.served).toBe(0);
    expect(existsSync(join(dir, "versions"))).toBe(false);
    // The launcher closes the trial: the update goes on.
    rmSync(join(dir, "healthy"));
    while (!settled) {
      clock.step(200);
      await Bun.sleep(1);
    }
    expect((await taking).name).toBe(`0.2.0-${sha256.slice(0, 12)}`);
    expect(linkedVersion(dir, "current")).toBe(`0.2.0-${sha256.slice(0, 12)}`);
  });

  test("a trial the launcher does not close within 30 s: the update is tried again later", async () => {
    const { text, key } = await signed();
    const clock = new FakeClock();
    writeFileSync(join(dir, "healthy"), "0.1.0-aaaaaaaaaaaa\n");
    const taking = takeUpdate(await taker({ keys: [key], clock }), {
      manifest: text,
      url: server.url,
    }).catch((e) => e);
    for (let i = 0; i <= 150; i++) {
      clock.step(200);
      await Bun.sleep(1);
    }
    const err = await taking;
    expect(err).toBeInstanceOf(DownloadError);
    expect(err.reason).toBe("interrupted");
    expect(server.served).toBe(0);
  });
});
