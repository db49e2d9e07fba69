// A real hub in this process on a free loopback port, for the hub's property files: an operator,
// two joined devices whose agents are connected (cam-1 reports a node, a pod and an event; cam-2
// only stays connected, as the other agent that must keep being served), and canary objects
// (a ConfigMap, a Secret and a DaemonSet) that no fuzzed request names.

import { expect } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Hub, startHub } from "../../../src/hub/hub.ts";
import { realClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { ProtocolClient } from "../../lib/hub.ts";
import { until } from "../../lib/until.ts";
import { CANARY } from "./hub-kube-requests.ts";

export interface InProcessHub {
  hub: Hub;
  url: string;
  token: string;
  agents: { "cam-1": ProtocolClient; "cam-2": ProtocolClient };
  api(path: string, init?: RequestInit): Promise<Response>;
  stop(): Promise<void>;
}

const canaries = [
  {
    path: "/api/v1/namespaces/default/configmaps",
    body: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: CANARY }, data: { keep: "1" } },
  },
  {
    path: "/api/v1/namespaces/default/secrets",
    body: { apiVersion: "v1", kind: "Secret", metadata: { name: CANARY }, data: { k: "MQ==" } },
  },
  {
    path: "/apis/apps/v1/namespaces/default/daemonsets",
    body: {
      apiVersion: "apps/v1",
      kind: "DaemonSet",
      metadata: { name: CANARY },
      spec: {
        selector: { matchLabels: { app: CANARY } },
        template: {
          metadata: { labels: { app: CANARY } },
          spec: {
            nodeSelector: { never: "matches" },
            containers: [{ name: "main", image: "busybox" }],
          },
        },
      },
    },
  },
];

async function agent(h: InProcessHub, node: "cam-1" | "cam-2"): Promise<ProtocolClient> {
  const tok = await h.api("/api/v1/join-tokens", { method: "POST", body: "{}" });
  const { token } = (await tok.json()) as { token: string };
  const joined = await fetch(`${h.url}/api/v1/join`, {
    method: "POST",
    body: JSON.stringify({ joinToken: token, nodeName: node }),
  });
  const { credential } = (await joined.json()) as { credential: string };
  const c = new ProtocolClient(h.url, credential);
  await c.opened;
  c.send({ type: "hello", protocolVersion: 1, nodeName: node, agentVersion: "0", streamId: "s" });
  await c.waitFor("welcome");
  return c;
}

/** Sends cam-1's node, one pod and one event, and waits until the hub acknowledged them. */
async function report(c: ProtocolClient): Promise<void> {
  const meta = { namespace: "default", labels: { app: "web" } };
  c.send({
    type: "node",
    seq: 1,
    node: { apiVersion: "v1", kind: "Node", metadata: { name: "cam-1" }, spec: {}, status: {} },
  });
  c.send({
    type: "pod.upsert",
    seq: 2,
    uid: "u1",
    pod: {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { ...meta, name: "web-cam-1", uid: "u1" },
      spec: { nodeName: "cam-1", containers: [{ name: "web", image: "busybox" }] },
      status: { phase: "Running" },
    },
  });
  c.send({
    type: "event",
    seq: 3,
    event: {
      apiVersion: "v1",
      kind: "Event",
      metadata: { name: "web.1", namespace: "default" },
      involvedObject: { kind: "Pod", name: "web-cam-1", namespace: "default" },
      reason: "Started",
      message: "Started",
      type: "Normal",
      source: { host: "cam-1" },
      count: 1,
      firstTimestamp: "2026-01-01T00:00:00Z",
      lastTimestamp: "2026-01-01T00:00:00Z",
    },
  });
  await c.waitFor("ack");
}

export async function startInProcessHub(): Promise<InProcessHub> {
  const dataDir = mkdtempSync(join(tmpdir(), "fleetlet-fuzz-hub-"));
  const hub = await startHub({
    dataDir,
    hostname: "127.0.0.1",
    port: 0,
    clock: realClock,
    log: nullLogger,
    rateLimit: { messagesPerSecond: 1e6, burst: 1e6 },
  });
  const token = hub.createdOperatorToken ?? "";
  const h = {
    hub,
    url: hub.url,
    token,
    api: (path: string, init: RequestInit = {}) => {
      const headers = new Headers(init.headers);
      headers.set("authorization", `Bearer ${token}`);
      return fetch(hub.url + path, { ...init, headers });
    },
    async stop() {
      for (const a of Object.values(h.agents)) a.close();
      await hub.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  } as InProcessHub;
  h.agents = { "cam-1": await agent(h, "cam-1"), "cam-2": await agent(h, "cam-2") };
  await report(h.agents["cam-1"]);
  for (const c of canaries) {
    const res = await h.api(c.path, { method: "POST", body: JSON.stringify(c.body) });
    expect(res.status).toBe(201);
  }
  return h;
}

/** The canaries as the hub serves them now (without what changes by itself: status). */
export async function canaryState(h: InProcessHub): Promise<unknown[]> {
  return Promise.all(
    canaries.map(async (c) => {
      const res = await h.api(`${c.path}/${CANARY}`);
      expect(res.status).toBe(200);
      const o = (await res.json()) as { metadata: unknown; data?: unknown; spec?: unknown };
      return { metadata: o.metadata, data: o.data, spec: o.spec };
    }),
  );
}

/** cam-2's agent is still served: a heartbeat is answered. */
export async function otherAgentServed(h: InProcessHub): Promise<void> {
  const c = h.agents["cam-2"];
  const before = c.received.filter((m) => m.type === "hb").length;
  c.send({ type: "hb" });
  await until(
    "cam-2's heartbeat answered",
    () => c.received.filter((m) => m.type === "hb").length > before,
    5000,
  );
  expect(c.closed).toBeUndefined();
}
