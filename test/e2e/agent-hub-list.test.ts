// The compiled agent given a list of hub URLs (the replicas of one hub): a closed port in the
// list is passed over, and when the hub it reports to stops and the hub starts again on another
// URL of the list with the same data folder, the agent moves there, trusting it with the CA it
// verified on first contact, and resumes its stream. Needs root and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Node } from "../../src/api/node.ts";
import { TestAgent } from "../lib/agent.ts";
import { TestHub } from "../lib/hub.ts";
import { sleeperManifest } from "../lib/manifests.ts";
import { closedPorts } from "../lib/replicas.ts";
import { eventually } from "../lib/testbed.ts";

const hub = new TestHub(["--heartbeat-interval", "1s"], "127.0.0.1", true);
const agentArgs = [
  ...["--hub-reconnect-back-off-base", "200ms", "--hub-reconnect-back-off-max", "1s"],
  ...["--node-status-update-frequency", "1s"],
];
const agent = new TestAgent({ args: agentArgs });
const ports = { dead: 0, first: 0, second: 0 };
const urlOf = (port: number) => `https://127.0.0.1:${port}`;
const connectedTo = (port: number) =>
  new RegExp(`connected to the hub .*url="?wss://127\\.0\\.0\\.1:${port}/`);

async function hubNode(): Promise<Node | undefined> {
  const res = await hub.api(`/api/v1/nodes/${agent.nodeName}`);
  return res.status === 200 ? ((await res.json()) as Node) : undefined;
}

function online(): Promise<Node> {
  return eventually(
    "the device online in the hub",
    async () => {
      const node = await hubNode();
      return node?.metadata.annotations?.["hub.fleetlet.io/online"] === "true" ? node : undefined;
    },
    20_000,
    100,
  );
}

beforeAll(async () => {
  [ports.dead, ports.first, ports.second] = (await closedPorts(3)) as [number, number, number];
  hub.port = ports.first;
  await hub.start();
  const list = [ports.dead, ports.first, ports.second].map(urlOf).join(",");
  agentArgs.push("--hub", list, "--join-token", await hub.joinToken());
  await agent.start();
}, 60_000);
afterAll(async () => {
  await agent.cleanup();
  await hub.cleanup();
}, 60_000);

describe("an agent given the hub's URLs as a list (needs root and the test bed)", () => {
  test("with a closed port and a hub not started in the list, it joins the hub that runs", async () => {
    agent.writeManifest("web.yaml", sleeperManifest("web", agent.tb.busybox));
    const node = await online();
    expect(node.metadata.name).toBe(agent.nodeName);
    await hub.runningPod(agent.nodeName, "web");
    expect(agent.output).toMatch(connectedTo(ports.first));
    // The CA it trusts is the hub's, fetched and checked against the token at the live URL.
    expect(readFileSync(join(agent.rootDir, "hub", "ca.crt"), "utf8")).toBe(hub.caPem);
  }, 60_000);

  test("the hub stopped and started on another URL of the list with the same data: the agent follows and resumes", async () => {
    const web = await hub.runningPod(agent.nodeName, "web");
    const credential = readFileSync(join(agent.rootDir, "hub", "credential"), "utf8");
    await hub.stop();
    agent.writeManifest("late.yaml", sleeperManifest("late", agent.tb.busybox));
    await agent.waitPod("late", "Running", (p) => p.status?.phase === "Running");
    hub.url = "";
    hub.port = ports.second;
    await hub.start();
    expect(hub.url).toBe(urlOf(ports.second));
    await hub.runningPod(agent.nodeName, "late");
    await online();
    expect(agent.output).toMatch(connectedTo(ports.second));
    const again = await hub.runningPod(agent.nodeName, "web");
    expect(again.status?.containerStatuses?.[0]?.containerID).toBe(
      web.status?.containerStatuses?.[0]?.containerID,
    );
    // Same credential (no new join), same stream (resumed from what the hub acknowledged).
    expect(readFileSync(join(agent.rootDir, "hub", "credential"), "utf8")).toBe(credential);
    expect(agent.output).not.toContain("the hub's record of this stream differs");
  }, 90_000);
});
