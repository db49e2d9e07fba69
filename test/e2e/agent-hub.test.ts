// The compiled agent reporting to the compiled hub: a device's node and pods visible in the hub's
// API, and the faults of issue 6 with real processes: the hub killed and restarted, the agent
// killed and restarted, and an outage longer than the agent's outbox. Needs root and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Node } from "../../src/api/node.ts";
import type { Event, Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import { TestHub } from "../lib/hub.ts";
import { podNetworkShellManifest } from "../lib/manifests.ts";
import { eventually } from "../lib/testbed.ts";

const hub = new TestHub(["--heartbeat-interval", "1s"]);
const agentArgs: string[] = [
  "--hub-reconnect-back-off-base",
  "200ms",
  "--hub-reconnect-back-off-max",
  "2s",
  "--node-status-update-frequency",
  "1s",
  "--hub-outbox-max-events",
  "5",
];
const agent = new TestAgent({ args: agentArgs });
const img = agent.tb.busybox;

const manifest = (name: string, command = "sleep 3600") =>
  podNetworkShellManifest(name, img, command);

async function hubGet<T>(path: string): Promise<T> {
  const res = await hub.api(path);
  if (res.status !== 200) throw new Error(`GET ${path}: HTTP ${res.status}`);
  return (await res.json()) as T;
}
const hubPods = async () =>
  (await hubGet<{ items: Pod[] }>(`/api/v1/pods?nodeName=${agent.nodeName}`)).items;
const hubNodes = async () =>
  (await hubGet<{ items: Node[] }>("/api/v1/nodes")).items.filter(
    (n) => n.metadata.name === agent.nodeName,
  );
const online = async () => (await hubNodes())[0]?.metadata.annotations?.["hub.fleetlet.io/online"];

function hubPod(name: string, check: (p: Pod) => boolean, timeoutMs = 30_000): Promise<Pod> {
  return eventually(
    `pod ${name} in the hub`,
    async () =>
      (await hubPods()).find((p) => p.metadata.name === `${name}-${agent.nodeName}` && check(p)),
    timeoutMs,
    100,
  );
}

const containerId = (p: Pod | undefined) => p?.status?.containerStatuses?.[0]?.containerID;

beforeAll(async () => {
  await hub.start();
  agentArgs.push("--hub", hub.url, "--join-token", await hub.joinToken());
  await agent.start();
}, 60_000);
afterAll(async () => {
  await agent.cleanup();
  await hub.cleanup();
}, 60_000);

describe("fleetlet agent reporting to fleetlet hub (needs root and the test bed)", () => {
  test("the node and a pod on the device appear in the hub's API with their status", async () => {
    agent.writeManifest("web.yaml", manifest("web"));
    const pod = await hubPod("web", (p) => p.status?.phase === "Running");
    expect(containerId(pod)).toMatch(/^containerd:\/\//);
    const [node] = await eventually(
      "the node in the hub",
      async () => {
        const nodes = await hubNodes();
        return nodes.length > 0 ? nodes : undefined;
      },
      10_000,
    );
    expect(node?.status.nodeInfo?.containerRuntimeVersion).toMatch(/^containerd:\/\//);
    expect(node?.status.conditions?.find((c) => c.type === "Ready")?.status).toBe("True");
    expect(node?.metadata.labels?.["kubernetes.io/hostname"]).toBe(agent.nodeName);
    const local = agent.cli(["get", "node", "-o", "json"]);
    expect(local.code).toBe(0);
    expect((JSON.parse(local.stdout) as Node).metadata.name).toBe(agent.nodeName);
    // The images the device holds, as Node.status.images, reach the hub.
    const image = await eventually(
      "the pod's image in the hub's node",
      async () => {
        const [n] = await hubNodes();
        return n?.status.images?.find((i) => i.names.includes(agent.tb.busybox));
      },
      30_000,
    );
    expect(image.sizeBytes).toBeGreaterThan(0);
  }, 60_000);

  test("hub killed: pods keep running unchanged; hub restarted: the hub converges", async () => {
    const before = await agent.waitPod("web", "Running", (p) => p.status?.phase === "Running");
    await hub.kill();
    agent.writeManifest("late.yaml", manifest("late"));
    await agent.waitPod("late", "Running", (p) => p.status?.phase === "Running");
    const during = await agent.pod("web");
    expect(containerId(during)).toBe(containerId(before));
    expect(during?.status?.containerStatuses?.[0]?.restartCount).toBe(0);
    await hub.start();
    const t0 = Date.now();
    await hubPod("late", (p) => p.status?.phase === "Running", 15_000);
    const web = await hubPod("web", () => true);
    expect(containerId(web)).toBe(containerId(before));
    expect(Date.now() - t0).toBeLessThan(10_000);
  }, 90_000);

  test("agent killed and restarted: the hub shows it offline, then online, one node", async () => {
    await eventually("node online", async () => (await online()) === "true", 10_000);
    await agent.stop("SIGKILL");
    await eventually("node offline", async () => (await online()) === "false", 15_000, 250);
    await agent.start();
    await eventually("node online again", async () => (await online()) === "true", 15_000, 250);
    expect(await hubNodes()).toHaveLength(1);
    expect(
      (await hubPods()).filter((p) => p.metadata.name === `web-${agent.nodeName}`),
    ).toHaveLength(1);
  }, 60_000);

  test("an outage longer than the outbox: oldest events dropped, counted and reported", async () => {
    await hub.stop();
    for (const n of ["o1", "o2", "o3"]) agent.writeManifest(`${n}.yaml`, manifest(n));
    for (const n of ["o1", "o2", "o3"]) {
      await agent.waitPod(n, "Running", (p) => p.status?.phase === "Running");
    }
    const rss = Number(
      /VmRSS:\s+(\d+)/.exec(await Bun.file(`/proc/${agent.proc?.pid}/status`).text())?.[1],
    );
    await hub.start();
    await eventually(
      "the drop logged",
      async () => /dropped \d+ events while disconnected/.test(agent.output),
      15_000,
    );
    const dropped = Number(/dropped (\d+) events while disconnected/.exec(agent.output)?.[1]);
    expect(dropped).toBeGreaterThan(0);
    const events = await eventually(
      "EventsDropped in the hub",
      async () => {
        const list = await hubGet<{ items: Event[] }>(`/api/v1/events?nodeName=${agent.nodeName}`);
        return list.items.find((e) => e.reason === "EventsDropped");
      },
      15_000,
    );
    expect(events.message).toContain(`dropped ${dropped} events`);
    for (const n of ["o1", "o2", "o3"]) await hubPod(n, (p) => p.status?.phase === "Running");
    expect(rss).toBeLessThan(200 * 1024);
  }, 90_000);
});
