// Credentials with the compiled hub and agent: a node credential rotated twice over the live
// connection (a 6 s lifetime, a test setting) while the device's pod keeps running and its reports
// keep arriving, every file under the agent's <rootDir>/hub 0600; a one-use join token refused the second time; the hub's serving certificate
// renewed while it runs and seen by a new TLS connection; a revoked node's followed log ending.
// Needs root and the test bed.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { connect } from "node:tls";
import type { Node } from "../../src/api/node.ts";
import type { Pod } from "../../src/api/types.ts";
import { TestAgent } from "../lib/agent.ts";
import { TestHub } from "../lib/hub.ts";
import { shellPodManifest, sleeperManifest } from "../lib/manifests.ts";
import { eventually, fleetletBin } from "../lib/testbed.ts";

const hub = new TestHub(
  [
    "--heartbeat-interval",
    "1s",
    "--node-credential-lifetime",
    "6s",
    "--serving-cert-lifetime",
    "45s",
    "--serving-cert-check-interval",
    "2s",
  ],
  "127.0.0.1",
  true,
);
const agentArgs: string[] = [
  "--hub-reconnect-back-off-base",
  "200ms",
  "--hub-reconnect-back-off-max",
  "2s",
  "--node-status-update-frequency",
  "1s",
];
const agent = new TestAgent({ args: agentArgs });
const credentialFile = () => join(agent.rootDir, "hub", "credential");
const podName = () => `ticker-${agent.nodeName}`;

async function hubGet<T>(path: string): Promise<T> {
  const res = await hub.api(path);
  if (res.status !== 200) throw new Error(`GET ${path}: HTTP ${res.status}: ${await res.text()}`);
  return (await res.json()) as T;
}
const hubPods = async () =>
  (await hubGet<{ items: Pod[] }>(`/api/v1/pods?nodeName=${agent.nodeName}`)).items;
const hubPod = async () => (await hubPods()).find((p) => p.metadata.name === podName());

/** The serial number of the certificate a new TLS connection to the hub is served. */
function servedSerial(): Promise<string> {
  const port = Number(new URL(hub.url).port);
  return new Promise((resolve, reject) => {
    const s = connect({ host: "127.0.0.1", port, ca: hub.caPem }, () => {
      resolve(s.getPeerCertificate().serialNumber);
      s.end();
    });
    s.on("error", reject);
  });
}

let firstSerial = "";

beforeAll(async () => {
  await hub.start();
  firstSerial = await servedSerial();
  agentArgs.push("--hub", hub.url, "--join-token", await hub.joinToken());
  await agent.start();
  agent.writeManifest(
    "ticker.yaml",
    shellPodManifest("ticker", agent.tb.busybox, "while true; do echo tick; sleep 0.5; done"),
  );
}, 60_000);
afterAll(async () => {
  await agent.cleanup();
  await hub.cleanup();
}, 60_000);

describe("credentials with the compiled hub and agent (needs root and the test bed)", () => {
  test("the agent rotates its credential twice over its connection; its pod keeps running and its reports keep arriving", async () => {
    const running = await eventually(
      "the pod running in the hub",
      async () => {
        const p = await hubPod();
        return p?.status?.phase === "Running" ? p : undefined;
      },
      60_000,
      200,
    );
    const containerId = running.status?.containerStatuses?.[0]?.containerID;
    const seen = new Set([readFileSync(credentialFile(), "utf8")]);
    await eventually(
      "two rotations of the credential file",
      () => {
        seen.add(readFileSync(credentialFile(), "utf8"));
        return seen.size >= 3 ? true : undefined;
      },
      30_000,
      100,
    );
    const hubDir = join(agent.rootDir, "hub");
    expect((statSync(hubDir).mode & 0o777).toString(8)).toBe("700");
    const files = readdirSync(hubDir);
    expect(files).toContain("credential");
    for (const f of files)
      expect([f, (statSync(join(hubDir, f)).mode & 0o777).toString(8)]).toEqual([f, "600"]);
    expect(agent.output).toContain("rotated the node credential");
    expect(agent.output).not.toContain("refuses this device's credential");
    expect(agent.output).not.toContain("disconnected from the hub");
    agent.writeManifest("after.yaml", sleeperManifest("after", agent.tb.busybox));
    await eventually(
      "a pod made after the rotations running in the hub",
      async () => {
        const p = (await hubPods()).find((x) => x.metadata.name === `after-${agent.nodeName}`);
        return p?.status?.phase === "Running" ? p : undefined;
      },
      60_000,
      200,
    );
    const node = await hubGet<Node>(`/api/v1/nodes/${agent.nodeName}`);
    expect(node.metadata.annotations?.["hub.fleetlet.io/online"]).toBe("true");
    const now = await hubPod();
    expect(now?.status?.phase).toBe("Running");
    expect(now?.status?.containerStatuses?.[0]?.containerID).toBe(containerId);
    expect(now?.status?.containerStatuses?.[0]?.restartCount).toBe(0);
    for (const c of seen) expect(agent.output).not.toContain(c.trim());
    for (const c of seen) expect(hub.output).not.toContain(c.trim());
  }, 90_000);

  test("a one-use join token made with `hub token create --uses 1` joins once and is refused the second time", async () => {
    const made = Bun.spawnSync([
      fleetletBin,
      "hub",
      "token",
      "create",
      "--hub",
      hub.url,
      "--token",
      hub.operatorToken,
      "--ca-file",
      join(hub.dataDir, "tls", "ca.crt"),
      "--uses",
      "1",
    ]);
    expect(made.exitCode).toBe(0);
    expect(made.stderr.toString()).toContain("good for 1 join");
    const token = made.stdout.toString().trim();
    expect((await hub.join(token, "once-a")).status).toBe(200);
    const second = await hub.join(token, "once-b");
    expect(second.status).toBe(401);
    expect(((await second.json()) as { message: string }).message).toMatch(
      /^join token [0-9a-f]{12} was already used: it allowed 1 join$/,
    );
  });

  test("the hub renews its serving certificate while it runs: a new TLS connection gets it, signed by the same CA", async () => {
    const serial = await eventually(
      "a renewed serving certificate",
      async () => {
        const s = await servedSerial();
        return s !== firstSerial ? s : undefined;
      },
      60_000,
      500,
    );
    expect(serial).not.toBe(firstSerial);
    expect(hub.output).toContain("renewed the hub's serving certificate");
    expect(await hubPod()).toBeDefined();
  }, 90_000);

  test("revoking the node ends its followed log stream at once", async () => {
    const res = await hub.api(`/api/v1/namespaces/default/pods/${podName()}/log?follow=true`);
    expect(res.status).toBe(200);
    const reader = res.body?.getReader();
    if (reader === undefined) throw new Error("no log body");
    const first = await reader.read();
    expect(Buffer.from(first.value ?? []).toString()).toContain("tick");
    expect(
      (await hub.api(`/api/v1/nodes/${agent.nodeName}/revoke`, { method: "POST" })).status,
    ).toBe(200);
    const ended = (async () => {
      for (;;) {
        const r = await reader.read();
        if (r.done) return "done";
      }
    })().catch(() => "broken");
    const outcome = await Promise.race([
      ended,
      new Promise((r) => setTimeout(() => r("still open after 5 s"), 5000)),
    ]);
    expect(["done", "broken"]).toContain(outcome as string);
  }, 30_000);
});
