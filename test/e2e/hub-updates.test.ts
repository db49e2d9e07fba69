// A per-node agent update through the compiled hub (docs/hub-releases.md, "Updating one node"):
// a signed copy of dist/fleetlet pushed, `fleetlet hub update NODE --version V`, and an agent
// spoken at the protocol level (ProtocolClient) that announced "updates": it receives `update`
// with the manifest as pushed, byte for byte, and a path it downloads from with its credential;
// its update.status shows in `fleetlet hub update status`; the offer comes again after each
// welcome and after a hub restart; cancel. Needs dist/fleetlet (scripts/build); no root, no
// test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseManifest } from "../../src/release/manifest.ts";
import { nodeArch, nodeReport, ProtocolClient, TestHub } from "../lib/hub.ts";
import { eventually, fleetletBin } from "../lib/testbed.ts";

const dir = mkdtempSync(join(tmpdir(), "hub-updates-"));
const exe = join(dir, "fleetlet");
const arch = nodeArch;
const version = "9.9.9-upd";
const NODE = "cam-upd";
const hub = new TestHub();
let credential = "";
let agent: ProtocolClient;

function run(args: string[]) {
  const p = Bun.spawnSync([fleetletBin, ...args], { stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
}

function hubCli(...args: string[]) {
  return run(["hub", ...args, "--hub", hub.url, "--token", hub.operatorToken]);
}

/** `fleetlet hub update status NODE -o json`, parsed. */
function statusOf(): Record<string, unknown> {
  const out = hubCli("update", "status", NODE, "-o", "json");
  expect(out.stderr).toBe("");
  return (JSON.parse(out.stdout) as { items: Record<string, unknown>[] }).items[0] ?? {};
}

/** The node as its agent reports it: running 0.1.0 on this machine's arch. */
const nodeMessage = nodeReport(NODE);

/** Connects a new agent of `node` that takes updates; waits for its welcome. */
async function connect(streamId = "s1", node = NODE, cred = credential): Promise<ProtocolClient> {
  const c = new ProtocolClient(hub.url, cred);
  await c.opened;
  c.send({
    type: "hello",
    protocolVersion: 1,
    nodeName: node,
    agentVersion: "0.1.0",
    streamId,
    features: ["updates"],
  });
  await c.waitFor("welcome");
  return c;
}

beforeAll(async () => {
  copyFileSync(fleetletBin, exe);
  expect(run(["release", "keygen", "--out", join(dir, "ops")]).code).toBe(0);
  const signed = run(["release", "sign", "--key", join(dir, "ops.key"), "--version", version, exe]);
  expect(signed.stderr).toBe("");
  hub.port = 20_000 + Math.floor(Math.random() * 12_000);
  await hub.start();
  const push = hubCli("release", "push", exe, "--signature", `${exe}.sig`);
  expect(push.stderr).toBe("");
  credential = await hub.credentialFor(NODE);
  agent = await connect();
  agent.send(nodeMessage);
  await eventually(
    "the node's arch on the hub",
    async () => {
      const res = await hub.api(`/api/v1/nodes/${NODE}/update`);
      const arch = ((await res.json()) as { arch?: string }).arch;
      if (arch === undefined && agent.closed !== undefined)
        throw new Error(`the hub closed the agent: ${JSON.stringify(agent.received)}`);
      return arch;
    },
    5000,
    50,
  );
}, 180_000);
afterAll(async () => {
  agent?.close();
  await hub.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

describe("a per-node agent update (compiled hub)", () => {
  test("fleetlet hub --help lists the update commands", () => {
    const help = run(["hub", "--help"]);
    expect(help.stdout + help.stderr).toContain(
      "fleetlet hub update NODE --version V | --cancel --hub URL",
    );
  });

  test("a device's credential cannot set an update", async () => {
    const res = await hub.api(
      `/api/v1/nodes/${NODE}/update`,
      { method: "PUT", body: JSON.stringify({ version }) },
      credential,
    );
    expect(res.status).toBe(403);
    expect(agent.received.some((m) => m.type === "update")).toBe(false);
  });

  test("hub update --version: the agent gets the manifest as pushed and a path it can download", async () => {
    const set = hubCli("update", NODE, "--version", version);
    expect(set.stderr).toBe("");
    expect(set.stdout).toBe(`node/${NODE} update to ${version} set\n`);
    const msg = await agent.waitFor("update");
    const pushed = readFileSync(`${exe}.sig`, "utf8");
    expect(msg).toEqual({
      type: "update",
      version,
      arch,
      manifest: pushed,
      path: `/api/v1/releases/${version}/${arch}`,
    });
    const res = await hub.api(String(msg.path), { headers: { range: "bytes=0-1" } }, credential);
    expect(res.status).toBe(206);
    expect(res.headers.get("x-fleetlet-release-sha256")).toBe(parseManifest(pushed).sha256);
    expect(new Uint8Array(await res.arrayBuffer())).toEqual(new Uint8Array([0x1f, 0x8b]));
  }, 30_000);

  test("update.status shows in hub update status: downloading with its progress, then healthy", async () => {
    agent.send({ type: "update.status", version, phase: "downloading", bytes: 25, total: 100 });
    const row = await eventually(
      "the downloading row",
      () => {
        const out = hubCli("update", "status").stdout;
        return out.includes("downloading") ? out : undefined;
      },
      5000,
      100,
    );
    expect(row).toMatch(/^NODE +ARCH +RUNNING +WANTED +PHASE +PROGRESS +REASON +AGE\n/);
    expect(row).toMatch(
      new RegExp(
        `\\n?${NODE} +${arch} +0\\.1\\.0 +${version.replaceAll(".", "\\.")} +downloading +25% +- +\\S+\\n`,
      ),
    );
    agent.send({ type: "update.status", version, phase: "healthy" });
    await eventually("healthy", () => statusOf().phase === "healthy" || undefined, 5000, 100);
    expect(statusOf()).toMatchObject({ node: NODE, arch, running: "0.1.0", wanted: version });
    const all = JSON.parse(hubCli("update", "status", "-o", "json").stdout) as { items: unknown[] };
    expect(all.items).toMatchObject([{ node: NODE, phase: "healthy" }]);
    const node = (await (await hub.api(`/api/v1/nodes/${NODE}`)).json()) as {
      metadata: { annotations: Record<string, string> };
    };
    expect(node.metadata.annotations["hub.fleetlet.io/update"]).toBe(`healthy ${version}`);
  }, 30_000);

  test("a new node's update, set before it reported its arch, is offered once its first Node comes", async () => {
    const cred = await hub.credentialFor("cam-new");
    const set = hubCli("update", "cam-new", "--version", version);
    expect(set.stdout).toBe(
      `node/cam-new update to ${version} set (no release ${version} for the node's arch: it has not reported it yet)\n`,
    );
    const fresh = await connect("n1", "cam-new", cred);
    try {
      fresh.send({ type: "hb" });
      await fresh.waitFor("hb");
      expect(fresh.received.some((m) => m.type === "update")).toBe(false);
      const first = structuredClone(nodeMessage);
      first.node.metadata.name = "cam-new";
      fresh.send(first);
      expect(await fresh.waitFor("update")).toMatchObject({ version, arch });
    } finally {
      fresh.close();
    }
  }, 30_000);

  test("the offer comes again after a new welcome", async () => {
    agent.close();
    agent = await connect("s2");
    expect((await agent.waitFor("update")).version).toBe(version);
  }, 30_000);

  test("a hub restart keeps the wanted release, and offers it after the welcome", async () => {
    agent.close();
    await hub.stop();
    await hub.start();
    expect(statusOf()).toMatchObject({ wanted: version, arch });
    agent = await connect("s3");
    expect((await agent.waitFor("update")).manifest).toBe(readFileSync(`${exe}.sig`, "utf8"));
  }, 60_000);

  test("cancel drops the wish: no offer after the next welcome; both are audited", async () => {
    const cancel = hubCli("update", NODE, "--cancel");
    expect(cancel.stdout).toBe(`node/${NODE} update canceled\n`);
    expect(statusOf().wanted).toBeUndefined();
    agent.close();
    agent = await connect("s4");
    agent.send({ type: "hb" });
    await agent.waitFor("hb");
    expect(agent.received.some((m) => m.type === "update")).toBe(false);
    const audit = hubCli("audit").stdout;
    expect(audit).toMatch(new RegExp(`update +${NODE} .*set ${version.replaceAll(".", "\\.")}`));
    expect(audit).toMatch(new RegExp(`update +${NODE} .*cancel ${version.replaceAll(".", "\\.")}`));
  }, 30_000);
});
