// Secrets at rest with the compiled hub: a Secret applied through the CLI is in the hub's
// database only sealed (its value in no file of the data folder but the key's), is served whole
// after a restart, a hub given a key file without the Secret's key refuses to start and says
// why, and a rotated key file (the new key first) seals again with the new key, after which the
// old key can go. Needs the compiled fleetlet (scripts/build); no runtime.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { hubCli, tempManifest } from "../lib/deploy.ts";
import { TestHub } from "../lib/hub.ts";
import { fleetletBin } from "../lib/testbed.ts";

const MARKER = "at-rest-marker-5b1e07d2";
const hub = new TestHub();

/** Every file of the hub's data folder but the key file, as one latin1 string. */
function dataFiles(): string {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name !== "secrets.key") out.push(readFileSync(p).toString("latin1"));
    }
  };
  walk(hub.dataDir);
  return out.join("\n");
}

async function password(): Promise<string> {
  const res = await hub.api("/api/v1/namespaces/default/secrets/db");
  expect(res.status).toBe(200);
  const s = (await res.json()) as { data: { password: string } };
  return atob(s.data.password);
}

/** Runs the hub on its data folder with `args` until it listens or exits: its output and code. */
async function startWith(args: string[]): Promise<{ code: number | null; output: string }> {
  const p = Bun.spawn(
    [fleetletBin, "hub", "--data", hub.dataDir, "--listen", "127.0.0.1:0", "--plain-http", ...args],
    { stdout: "pipe", stderr: "pipe" },
  );
  let output = "";
  const read = async (s: ReadableStream<Uint8Array>) => {
    for await (const c of s) output += new TextDecoder().decode(c);
  };
  void read(p.stdout);
  void read(p.stderr);
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline && p.exitCode === null && !output.includes("hub listening"))
    await Bun.sleep(50);
  const code = p.exitCode;
  p.kill("SIGTERM");
  await p.exited;
  return { code, output };
}

beforeAll(async () => {
  await hub.start();
});
afterAll(async () => {
  await hub.cleanup();
});

describe("Secrets at rest on the hub (needs the compiled fleetlet)", () => {
  test("an applied Secret is stored sealed, with a key file of the hub's own, and served whole after a restart", async () => {
    const file = tempManifest(
      "s.yaml",
      `apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: ${MARKER}\n`,
    );
    const r = hubCli(hub, ["apply", "-f", file]);
    expect(r).toMatchObject({ code: 0 });
    expect(await password()).toBe(MARKER);
    const key = join(hub.dataDir, "secrets.key");
    expect(statSync(key).mode & 0o777).toBe(0o600);
    const files = dataFiles();
    expect(files).toContain("sealed:v1:");
    expect(files).not.toContain(MARKER);
    expect(files).not.toContain(btoa(MARKER));
    await hub.stop();
    await hub.start();
    expect(await password()).toBe(MARKER);
  });

  test("a key file without the Secret's key: the hub does not start and names the key; a rotated file seals again", async () => {
    await hub.stop();
    const own = readFileSync(join(hub.dataDir, "secrets.key"), "utf8").trim();
    const other = join(hub.dataDir, "other.key");
    writeFileSync(other, `${randomBytes(32).toString("base64")}\n`, { mode: 0o600 });
    const refused = await startWith(["--secrets-key-file", other]);
    expect(refused.code).toBe(1);
    expect(refused.output).toMatch(
      /fleetlet: the hub cannot start: Secret default\/db was sealed with key [0-9a-f]{8}, which the secrets key file does not hold/,
    );
    const fresh = readFileSync(other, "utf8").trim();
    writeFileSync(other, `${fresh}\n${own}\n`);
    const rotated = await startWith(["--secrets-key-file", other]);
    expect(rotated.output).toContain("sealed stored Secrets with the sealing key");
    writeFileSync(other, `${fresh}\n`);
    const newOnly = await startWith(["--secrets-key-file", other]);
    expect(newOnly.output).toContain("hub listening");
    expect(newOnly.output).not.toContain("sealed stored Secrets");
  }, 40_000);
});
