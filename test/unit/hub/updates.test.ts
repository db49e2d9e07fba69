// Per-node agent updates on the hub (src/hub/updates/, docs/hub-releases.md "Updating one
// node"): the wanted release is stored and survives a reopen; the `update` offer goes to an
// agent that takes updates, after each welcome and when the wanted release changes, never to
// one without the feature or already running the version; update.status is kept, stale when
// of another version.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  decodeAgentMessage,
  decodeHubMessage,
  HUB_ANNOTATIONS,
  UPDATE_PHASES,
} from "../../../src/protocol/index.ts";
import { agentSocket, manifestText, settle, updateHub } from "../../lib/hub-updates.ts";

const dir = mkdtempSync(join(tmpdir(), "hub-updates-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the wanted release", () => {
  test("is stored: a reopened hub has it, and a cancel is stored too", async () => {
    const path = join(dir, "hub.db");
    const a = await updateHub(path);
    a.releases.add("0.2.0", "arm64");
    await a.updates.set("cam-1", "0.2.0");
    a.store.close();
    const b = await updateHub(path);
    expect(b.updates.wantedFor("cam-1")?.version).toBe("0.2.0");
    expect(await b.updates.cancel("cam-1")).toBe(true);
    b.store.close();
    const c = await updateHub(path);
    expect(c.updates.wantedFor("cam-1")).toBeUndefined();
    expect(await c.updates.cancel("cam-1")).toBe(false);
    c.store.close();
  });

  test("is refused for an unknown node or a version with no release at all", async () => {
    const h = await updateHub();
    h.releases.add("0.2.0", "amd64");
    await expect(h.updates.set("nope", "0.2.0")).rejects.toThrow('node "nope" not found');
    await expect(h.updates.set("cam-1", "9.9.9")).rejects.toThrow("release 9.9.9 not found");
    await expect(h.updates.cancel("nope")).rejects.toThrow('node "nope" not found');
    expect(h.updates.wantedFor("cam-1")).toBeUndefined();
  });

  test("is kept when no release exists for the node's arch, and its view says why", async () => {
    const h = await updateHub();
    h.releases.add("0.2.0", "amd64");
    await h.updates.set("cam-1", "0.2.0");
    const [v] = await h.updates.views("cam-1");
    expect(v).toMatchObject({ node: "cam-1", arch: "arm64", running: "0.1.0", wanted: "0.2.0" });
    expect(v?.problem).toBe("no release 0.2.0 for arm64");
  });

  test("of a node that has not reported its arch is kept, and its view says so", async () => {
    const h = await updateHub(":memory:", null);
    h.releases.add("0.2.0", "amd64");
    await h.updates.set("cam-1", "0.2.0");
    const [v] = await h.updates.views();
    expect(v?.arch).toBeUndefined();
    expect(v?.problem).toContain("has not reported it yet");
  });
});

describe("the update offer", () => {
  test("is sent after the welcome to an agent that takes updates, with the stored manifest", async () => {
    const h = await updateHub();
    h.releases.add("0.2.0", "arm64");
    await h.updates.set("cam-1", "0.2.0");
    const agent = agentSocket(h.sessions, h.credential);
    agent.hello();
    await settle();
    expect(agent.sent[0]?.type).toBe("welcome");
    expect(agent.updatesSent()).toEqual([
      {
        type: "update" as const,
        version: "0.2.0",
        arch: "arm64" as const,
        manifest: manifestText("0.2.0", "arm64"),
        path: "/api/v1/releases/0.2.0/arm64",
      },
    ]);
  });

  test("is sent again after each welcome, while the release is wanted", async () => {
    const h = await updateHub();
    h.releases.add("0.2.0", "arm64");
    await h.updates.set("cam-1", "0.2.0");
    const first = agentSocket(h.sessions, h.credential);
    first.hello();
    await settle();
    first.close();
    const second = agentSocket(h.sessions, h.credential);
    second.hello();
    await settle();
    expect(first.updatesSent()).toHaveLength(1);
    expect(second.updatesSent()).toHaveLength(1);
  });

  test("is sent at once when the wanted release is set while the agent is connected", async () => {
    const h = await updateHub();
    h.releases.add("0.2.0", "arm64");
    const agent = agentSocket(h.sessions, h.credential);
    agent.hello();
    await settle();
    expect(agent.updatesSent()).toHaveLength(0);
    await h.updates.set("cam-1", "0.2.0");
    h.sessions.updateChanged("cam-1");
    await settle();
    expect(agent.updatesSent().map((m) => m.version)).toEqual(["0.2.0"]);
  });

  test("is not sent to an agent that did not announce updates", async () => {
    const h = await updateHub();
    h.releases.add("0.2.0", "arm64");
    await h.updates.set("cam-1", "0.2.0");
    const agent = agentSocket(h.sessions, h.credential);
    agent.hello("0.1.0", ["desired-pods", "streams"]);
    h.sessions.updateChanged("cam-1");
    await settle();
    expect(agent.sent.map((m) => m.type)).toEqual(["welcome"]);
  });

  test("is not sent to an agent already running the version; its view is done", async () => {
    const h = await updateHub();
    h.releases.add("0.2.0", "arm64");
    await h.updates.set("cam-1", "0.2.0");
    const agent = agentSocket(h.sessions, h.credential);
    agent.hello("0.2.0");
    await settle();
    expect(agent.updatesSent()).toHaveLength(0);
    const [v] = await h.updates.views("cam-1");
    expect(v).toMatchObject({ running: "0.2.0", wanted: "0.2.0", phase: "done" });
  });

  test("to an agent restarted into the version, none; its view keeps the phase it reported", async () => {
    const h = await updateHub();
    h.releases.add("0.2.0", "arm64");
    await h.updates.set("cam-1", "0.2.0");
    const old = agentSocket(h.sessions, h.credential);
    old.hello("0.1.0");
    old.say({ type: "update.status", version: "0.2.0", phase: "restarting" });
    old.close();
    const updated = agentSocket(h.sessions, h.credential);
    updated.hello("0.2.0");
    updated.say({ type: "update.status", version: "0.2.0", phase: "healthy" });
    await settle();
    expect(updated.updatesSent()).toHaveLength(0);
    const [v] = await h.updates.views("cam-1");
    expect(v).toMatchObject({ running: "0.2.0", wanted: "0.2.0", phase: "healthy" });
  });

  test("is not sent when no release exists for the agent's arch, nor after a cancel", async () => {
    const h = await updateHub();
    h.releases.add("0.2.0", "amd64");
    await h.updates.set("cam-1", "0.2.0");
    const agent = agentSocket(h.sessions, h.credential);
    agent.hello();
    await settle();
    expect(agent.updatesSent()).toHaveLength(0);
    h.releases.add("0.2.0", "arm64");
    await h.updates.cancel("cam-1");
    h.sessions.updateChanged("cam-1");
    await settle();
    expect(agent.updatesSent()).toHaveLength(0);
  });
});

describe("the offer on a Node report", () => {
  const nodeMessage = (seq: number) => ({
    type: "node",
    seq,
    node: {
      apiVersion: "v1",
      kind: "Node",
      metadata: { name: "cam-1" },
      spec: {},
      status: {
        nodeInfo: {
          machineID: "m",
          systemUUID: "u",
          bootID: "b",
          kernelVersion: "6.1.0",
          osImage: "Debian GNU/Linux 12 (bookworm)",
          containerRuntimeVersion: "containerd://1.6.20",
          kubeletVersion: "fleetlet/0.1.0",
          kubeProxyVersion: "",
          operatingSystem: "linux",
          architecture: "arm64",
        },
      },
    },
  });

  test("a node's first Node, bringing its arch after the welcome, gets the offer once", async () => {
    const h = await updateHub(":memory:", null);
    h.releases.add("0.2.0", "arm64");
    await h.updates.set("cam-1", "0.2.0");
    const agent = agentSocket(h.sessions, h.credential);
    agent.hello();
    await settle();
    expect(agent.updatesSent()).toHaveLength(0);
    agent.say(nodeMessage(1));
    await settle();
    agent.say(nodeMessage(2));
    await settle();
    expect(agent.sent.find((m) => m.type === "error")).toBeUndefined();
    expect(agent.updatesSent().map((m) => m.arch)).toEqual(["arm64"]);
  });

  test("a release pushed later is offered to the nodes that want it (nodesWanting)", async () => {
    const h = await updateHub();
    h.releases.add("0.2.0", "amd64");
    await h.updates.set("cam-1", "0.2.0");
    const agent = agentSocket(h.sessions, h.credential);
    agent.hello();
    await settle();
    expect(agent.updatesSent()).toHaveLength(0);
    h.releases.add("0.2.0", "arm64");
    expect(h.updates.nodesWanting("0.2.0")).toEqual(["cam-1"]);
    expect(h.updates.nodesWanting("0.3.0")).toEqual([]);
    for (const n of h.updates.nodesWanting("0.2.0")) h.sessions.updateChanged(n);
    await settle();
    expect(agent.updatesSent().map((m) => m.version)).toEqual(["0.2.0"]);
  });
});

describe("the messages", () => {
  test("update.status decodes on the hub, update on the agent", async () => {
    const status = { type: "update.status", version: "0.2.0", phase: "healthy" } as const;
    expect(decodeAgentMessage(JSON.stringify(status))).toEqual({ ok: true, message: status });
    const update = {
      type: "update" as const,
      version: "0.2.0",
      arch: "arm64" as const,
      manifest: manifestText("0.2.0", "arm64"),
      path: "/api/v1/releases/0.2.0/arm64",
    };
    expect(decodeHubMessage(JSON.stringify(update))).toEqual({ ok: true, message: update });
  });
});

describe("update.status", () => {
  test.each(UPDATE_PHASES)("%s is kept as the node's latest, with its fields", async (phase) => {
    const h = await updateHub();
    h.releases.add("0.2.0", "arm64");
    await h.updates.set("cam-1", "0.2.0");
    const agent = agentSocket(h.sessions, h.credential);
    agent.hello();
    agent.say({
      type: "update.status",
      version: "0.2.0",
      phase: "downloading",
      bytes: 1,
      total: 4,
    });
    agent.say({ type: "update.status", version: "0.2.0", phase, bytes: 3, total: 4, reason: "r" });
    await settle();
    const [v] = await h.updates.views("cam-1");
    expect(v).toMatchObject({ phase, bytes: 3, total: 4, reason: "r", wanted: "0.2.0" });
    expect(v?.staleVersion).toBeUndefined();
    expect(agent.ws.data.closed).toBe(false);
    const annotations = h.fleet.view("cam-1")?.metadata.annotations ?? {};
    expect(annotations[HUB_ANNOTATIONS.update]).toBe(`${phase} 0.2.0`);
  });

  test("of another version than the wanted one is kept, marked stale", async () => {
    const h = await updateHub();
    h.releases.add("0.2.0", "arm64");
    h.releases.add("0.3.0", "arm64");
    await h.updates.set("cam-1", "0.2.0");
    const agent = agentSocket(h.sessions, h.credential);
    agent.hello();
    agent.say({ type: "update.status", version: "0.2.0", phase: "failed", reason: "sha256" });
    await h.updates.set("cam-1", "0.3.0");
    const [v] = await h.updates.views("cam-1");
    expect(v).toMatchObject({ wanted: "0.3.0", phase: "failed", staleVersion: "0.2.0" });
  });

  test("of a node with no wanted release is listed, stale", async () => {
    const h = await updateHub();
    const agent = agentSocket(h.sessions, h.credential);
    agent.hello();
    agent.say({ type: "update.status", version: "0.2.0", phase: "refused", reason: "no-keys" });
    const items = await h.updates.views();
    expect(items).toHaveLength(1);
    expect(items[0]).toMatchObject({ node: "cam-1", phase: "refused", staleVersion: "0.2.0" });
  });
});
