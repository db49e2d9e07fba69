// The hub's releases through the compiled binary: `fleetlet hub release push|list|delete` of a
// copy of dist/fleetlet signed with a fresh key, then a device's download of it with its node
// credential through downloadRelease() (the agent's downloader), cut in the middle and resumed,
// and the result verified with `fleetlet release verify`. Prints the hub's RSS growth during the
// push (not asserted: a figure). Needs dist/fleetlet (scripts/build); no root, no test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { appendFileSync, copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { downloadRelease } from "../../src/agent/update/download.ts";
import { parseManifest } from "../../src/release/manifest.ts";
import { TestHub } from "../lib/hub.ts";
import { fleetletBin } from "../lib/testbed.ts";

const dir = mkdtempSync(join(tmpdir(), "hub-releases-"));
const exe = join(dir, "fleetlet");
const arch = process.arch === "x64" ? "amd64" : "arm64";
const version = "9.9.9-e2e";
const hub = new TestHub();

function run(args: string[]) {
  const p = Bun.spawnSync([fleetletBin, ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
}

function hubCli(...args: string[]) {
  return run(["hub", "release", ...args, "--hub", hub.url, "--token", hub.operatorToken]);
}

/** kB of the process's resident memory now (VmRSS) or at its peak (VmHWM). */
function memoryKb(pid: number, field: "VmRSS" | "VmHWM"): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? Number.NaN);
}

beforeAll(async () => {
  copyFileSync(fleetletBin, exe);
  expect(run(["release", "keygen", "--out", join(dir, "ops")]).code).toBe(0);
  const signed = run(["release", "sign", "--key", join(dir, "ops.key"), "--version", version, exe]);
  expect(signed.stderr).toBe("");
  await hub.start();
}, 60_000);
afterAll(async () => {
  await hub.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

describe("hub releases (compiled)", () => {
  test("fleetlet hub --help lists the release commands", () => {
    const help = run(["hub", "--help"]);
    expect(help.stdout + help.stderr).toContain(
      "fleetlet hub release push FILE --signature FILE.sig --hub URL",
    );
  });

  test("push stores the release (hub RSS growth printed); the same bytes again change nothing", async () => {
    const pid = hub.proc?.pid ?? 0;
    const before = memoryKb(pid, "VmRSS");
    const hwmBefore = memoryKb(pid, "VmHWM");
    const started = performance.now();
    const push = hubCli("push", exe, "--signature", `${exe}.sig`);
    const ms = Math.round(performance.now() - started);
    expect(push.stderr).toBe("");
    expect(push.code).toBe(0);
    expect(push.stdout).toMatch(
      new RegExp(
        `^release ${version}/${arch} pushed: \\d+ bytes, \\d+ compressed, sha256 [0-9a-f]{12}\\n$`,
      ),
    );
    const peak = memoryKb(pid, "VmHWM");
    console.log(
      `hub push of ${Math.round(Bun.file(exe).size / 1e6)} MB in ${ms} ms: hub RSS ${Math.round(before / 1024)} MiB before, peak ${Math.round(peak / 1024)} MiB (peak before ${Math.round(hwmBefore / 1024)} MiB), growth ${Math.round((peak - before) / 1024)} MiB`,
    );
    const again = hubCli("push", exe, "--signature", `${exe}.sig`);
    expect(again.code).toBe(0);
    expect(again.stdout).toBe(
      `release ${version}/${arch} unchanged: the hub already has these bytes\n`,
    );
  }, 120_000);

  test("other bytes under the stored version are refused, saying so", () => {
    const other = join(dir, "other", "fleetlet");
    rmSync(join(dir, "other"), { recursive: true, force: true });
    Bun.spawnSync(["mkdir", "-p", join(dir, "other")]);
    copyFileSync(exe, other);
    appendFileSync(other, "x");
    expect(
      run(["release", "sign", "--key", join(dir, "ops.key"), "--version", version, other]).code,
    ).toBe(0);
    const push = hubCli("push", other, "--signature", `${other}.sig`);
    expect(push.code).toBe(1);
    expect(push.stderr).toContain(
      `fleetlet: the hub already has release ${version}/${arch} with other bytes`,
    );
  }, 120_000);

  test("list shows the release: its size, compressed size and sha256", () => {
    const table = hubCli("list");
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^VERSION +ARCH +SIZE +COMPRESSED +SHA256 +PUSHED\n/);
    expect(table.stdout).toContain(version);
    const json = JSON.parse(hubCli("list", "-o", "json").stdout) as {
      items: { version: string; size: number; compressedSize: number; sha256: string }[];
    };
    const manifest = parseManifest(readFileSync(`${exe}.sig`, "utf8"));
    expect(json.items).toHaveLength(1);
    expect(json.items[0]).toMatchObject({ version, size: manifest.size, sha256: manifest.sha256 });
    expect(json.items[0]?.compressedSize).toBeLessThan(manifest.size * 0.6);
  });

  test("a device downloads it with its credential, cut once and resumed, and it verifies", async () => {
    const credential = await hub.credentialFor("dev-update-1");
    const manifestText = readFileSync(`${exe}.sig`, "utf8");
    const manifest = parseManifest(manifestText);
    const url = `${hub.url}/api/v1/releases/${version}/${arch}`;
    const served = await hub.api(`/api/v1/releases/${version}/${arch}/manifest`, {}, credential);
    expect(await served.text()).toBe(manifestText);
    const { items } = (await (await hub.api("/api/v1/releases")).json()) as {
      items: { compressedSize: number }[];
    };
    const compressed = items[0]?.compressedSize ?? 0;
    let received = 0;
    const cut = new AbortController();
    // Counts the body bytes that reach the device, and cuts the first try halfway.
    const counting = async (u: string, init: RequestInit) => {
      const res = await fetch(u, init);
      const counter = new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, c) {
          received += chunk.length;
          if (received > compressed / 2) cut.abort(new Error("cut halfway"));
          c.enqueue(chunk);
        },
      });
      return new Response(res.body?.pipeThrough(counter), res);
    };
    const opts = {
      url,
      headers: { authorization: `Bearer ${credential}` },
      manifest,
      partPath: join(dir, "device", "download", `${manifest.sha256}.part`),
      outPath: join(dir, "device", "fleetlet"),
      fetch: counting,
    };
    const pid = hub.proc?.pid ?? 0;
    const rssBefore = memoryKb(pid, "VmRSS");
    let rssPeak = rssBefore;
    const sampler = setInterval(() => {
      rssPeak = Math.max(rssPeak, memoryKb(pid, "VmRSS"));
    }, 20);
    await expect(downloadRelease({ ...opts, signal: cut.signal })).rejects.toThrow("cut halfway");
    const resumed = await downloadRelease(opts);
    clearInterval(sampler);
    expect(resumed.resumedFrom).toBeGreaterThan(0);
    expect(resumed.resumedFrom + resumed.fetched).toBe(compressed);
    console.log(
      `device download: ${compressed} compressed bytes, ${received} received over two tries (resumed from ${resumed.resumedFrom}); hub RSS ${Math.round(rssBefore / 1024)} MiB before, peak ${Math.round(rssPeak / 1024)} MiB while serving`,
    );
    expect(received).toBeLessThan(compressed + 4 * 1024 * 1024);
    const verify = run([
      "release",
      "verify",
      "--public-key",
      join(dir, "ops.pub"),
      `${exe}.sig`,
      opts.outPath,
    ]);
    expect(verify.stderr).toBe("");
    expect(verify.code).toBe(0);
  }, 120_000);

  test("no credential or a wrong one is refused; an unknown version is 404", async () => {
    const path = `/api/v1/releases/${version}/${arch}`;
    expect((await hub.api(path, {}, "")).status).toBe(401);
    expect((await hub.api(path, {}, "flc_not-a-credential")).status).toBe(401);
    const credential = await hub.credentialFor("dev-update-2");
    const unknown = await hub.api(`/api/v1/releases/0.0.1/${arch}`, {}, credential);
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { message: string }).message).toBe(
      `release 0.0.1/${arch} not found`,
    );
  });

  test("delete removes it: the list is empty and the download 404", async () => {
    const del = hubCli("delete", version);
    expect(del.code).toBe(0);
    expect(del.stdout).toBe(`release ${version}/${arch} deleted\n`);
    expect(hubCli("list").stderr).toBe("No releases found\n");
    expect((await hub.api(`/api/v1/releases/${version}/${arch}`)).status).toBe(404);
  });

  test("the audit log shows the push and the delete, by whom and from where", () => {
    const audit = run(["hub", "audit", "--hub", hub.url, "--token", hub.operatorToken]);
    expect(audit.code).toBe(0);
    const v = version.replaceAll(".", "\\.");
    expect(audit.stdout).toMatch(
      new RegExp(
        `release +- +- +- +push ${v}/${arch} +\\S+ +0s +stored +operator@127\\.0\\.0\\.1\n`,
      ),
    );
    expect(audit.stdout).toMatch(
      new RegExp(
        `release +- +- +- +delete ${v} +\\S+ +0s +deleted ${v}/${arch} +operator@127\\.0\\.0\\.1\n`,
      ),
    );
  });
});
