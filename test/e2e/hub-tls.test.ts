// The hub serves TLS with its own CA by default; a device trusts it on first contact with the
// CA hash its join token carries, and refuses a hub whose CA is another. Needs root and the test
// bed (the agents run against its containerd).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Node } from "../../src/api/node.ts";
import { TestAgent } from "../lib/agent.ts";
import { TestHub } from "../lib/hub.ts";
import { eventually, fleetletBin } from "../lib/testbed.ts";

const hub = new TestHub(["--heartbeat-interval", "1s"], "127.0.0.1", true);
const fast = ["--hub-reconnect-back-off-base", "200ms", "--hub-reconnect-back-off-max", "1s"];
const agents: TestAgent[] = [];

beforeAll(async () => {
  await hub.start();
}, 30_000);
afterAll(async () => {
  for (const a of agents) await a.cleanup();
  await hub.cleanup();
}, 60_000);

describe("the hub's TLS and a device's trust in it (needs root and the test bed)", () => {
  test("a device joins an HTTPS hub with only the join token, and keeps the CA it verified", async () => {
    expect(hub.url).toStartWith("https://");
    const token = await hub.joinToken();
    expect(token).toMatch(/^flj_[A-Za-z0-9_-]{43}:sha256:[0-9a-f]{64}$/);
    expect(token.endsWith(hub.caHash)).toBe(true);
    const agent = new TestAgent({ args: [...fast, "--hub", hub.url, "--join-token", token] });
    agents.push(agent);
    await agent.start();
    await eventually(
      "the device online in the hub",
      async () => {
        const res = await hub.api(`/api/v1/nodes/${agent.nodeName}`);
        if (res.status !== 200) return undefined;
        const node = (await res.json()) as Node;
        return node.metadata.annotations?.["hub.fleetlet.io/online"] === "true" ? node : undefined;
      },
      20_000,
      100,
    );
    expect(readFileSync(join(agent.rootDir, "hub", "ca.crt"), "utf8")).toBe(hub.caPem);
  }, 40_000);

  test("a device refuses a hub whose CA is not the one its token names, and joins nothing", async () => {
    const token = (await hub.joinToken()).replace(/:sha256:.*$/, `:sha256:${"0".repeat(64)}`);
    const agent = new TestAgent({ args: [...fast, "--hub", hub.url, "--join-token", token] });
    agents.push(agent);
    await agent.start();
    await eventually(
      "the agent to say why it does not trust the hub",
      () => agent.output.includes("is not the one the join token names"),
      15_000,
      100,
    );
    expect(existsSync(join(agent.rootDir, "hub", "credential"))).toBe(false);
    expect((await hub.api(`/api/v1/nodes/${agent.nodeName}`)).status).toBe(404);
  }, 30_000);

  test("plain HTTP is refused off loopback: the hub's --plain-http, and an agent's http:// hub URL", () => {
    const h = Bun.spawnSync([fleetletBin, "hub", "--plain-http", "--listen", "0.0.0.0:0"]);
    expect(h.exitCode).toBe(2);
    expect(h.stderr.toString()).toContain("--plain-http is only for a loopback --listen address");
    const a = Bun.spawnSync([fleetletBin, "agent", "--hub", "http://192.0.2.1:7443"]);
    expect(a.exitCode).toBe(2);
    expect(a.stderr.toString()).toContain("is not TLS and not loopback");
  });
});
