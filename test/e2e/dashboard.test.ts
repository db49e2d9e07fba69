// The hub's dashboard in headless Chromium, against the compiled `fleetlet hub`: sign-in (a
// wrong token is refused), devices and pods appearing live from protocol-level agents, the device
// and pod pages, escaping of device text, and reconnecting after a hub restart. Screenshots go to
// the OS temp dir (fleetlet-dashboard-*.png) for a person to look at.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import type { Node } from "../../src/api/node.ts";
import type { ContainerStatus, Event, Pod } from "../../src/api/types.ts";
import { makeContainer, makePod } from "../lib/builders.ts";
import { ProtocolClient, TestHub } from "../lib/hub.ts";

const CHROMIUM = "/usr/bin/chromium";
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
const SHOTS = tmpdir();
const UI_TIMEOUT = 5000;
setDefaultTimeout(15_000);

const hub = new TestHub(["--heartbeat-interval", "2s"]);
const agents: ProtocolClient[] = [];
const seqs = new Map<string, number>();
let profileDir = "";
let context: BrowserContext;
let page: Page;

const iso = (agoMs = 0) => new Date(Date.now() - agoMs).toISOString().replace(/\.\d+Z$/, "Z");

function node(name: string, ready: boolean, arch = "arm64"): Node {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name,
      labels: { "kubernetes.io/hostname": name, "kubernetes.io/arch": arch, site: "lab" },
    },
    spec: {},
    status: {
      capacity: {
        cpu: "4",
        memory: "3884548Ki",
        "ephemeral-storage": "30420640Ki",
        pods: "110",
        "fleetlet.io/serial": "3",
      },
      allocatable: {
        "fleetlet.io/serial": "2",
        cpu: "4",
        memory: "3782148Ki",
        "ephemeral-storage": "28035800Ki",
        pods: "110",
      },
      conditions: [
        {
          type: "Ready",
          status: ready ? "True" : "False",
          lastHeartbeatTime: iso(),
          lastTransitionTime: iso(3_600_000),
          reason: ready ? "KubeletReady" : "ContainerRuntimeNotReady",
          message: ready ? "fleetlet is posting ready status" : "container runtime is down",
        },
        { type: "MemoryPressure", status: "False", reason: "KubeletHasSufficientMemory" },
        { type: "DiskPressure", status: "False", reason: "KubeletHasNoDiskPressure" },
      ],
      addresses: [
        { type: "InternalIP", address: "192.168.1.20" },
        { type: "Hostname", address: name },
      ],
      nodeInfo: {
        machineID: "3f1c9a0e5b7d4c2e8a6f1b3d5c7e9a0b",
        systemUUID: "3f1c9a0e-5b7d-4c2e-8a6f-1b3d5c7e9a0b",
        bootID: "b2d4f6a8-1c3e-5a7b-9d0f-2e4a6c8b0d1f",
        kernelVersion: "6.1.0-21-arm64",
        osImage: "Debian GNU/Linux 12 (bookworm)",
        containerRuntimeVersion: "containerd://1.6.20",
        kubeletVersion: "fleetlet/0.1.0",
        kubeProxyVersion: "",
        operatingSystem: "linux",
        architecture: arch,
      },
    },
  };
}

function running(name: string, ready: boolean, restartCount = 0): ContainerStatus {
  return {
    name,
    state: { running: { startedAt: iso(90_000) } },
    lastState: {},
    ready,
    restartCount,
    image: "docker.io/library/busybox:1.36",
    imageID: "sha256:5c1a2b3c4d5e6f",
    containerID: "containerd://9b0e4f3a2c1d5e6f7a8b9c0d1e2f3a4b",
    started: true,
  };
}

/** A pod "camera" with a probed container, in the given state. */
function cameraPod(nodeName: string, phase: "Pending" | "Running"): Pod {
  const web = makeContainer({
    name: "web",
    readinessProbe: { httpGet: { path: "/healthz", port: 8080 }, periodSeconds: 5 },
    livenessProbe: { tcpSocket: { port: 8080 }, periodSeconds: 10 },
  });
  const creating: ContainerStatus = {
    ...running("web", false),
    state: { waiting: { reason: "ContainerCreating" } },
    started: false,
  };
  const isRunning = phase === "Running";
  return makePod({
    name: "camera",
    uid: `uid-${nodeName}-camera`,
    labels: { app: "camera" },
    containers: [web],
    spec: { nodeName },
    status: {
      phase,
      qosClass: "BestEffort",
      hostIP: "192.168.1.20",
      ...(isRunning && { podIP: "10.88.0.7", startTime: iso(95_000) }),
      conditions: [
        { type: "PodScheduled", status: "True", lastTransitionTime: iso(100_000) },
        { type: "Ready", status: isRunning ? "True" : "False", lastTransitionTime: iso(80_000) },
      ],
      containerStatuses: [isRunning ? running("web", true) : creating],
    },
  });
}

function crashingPod(nodeName: string): Pod {
  const crash: ContainerStatus = {
    ...running("worker", false, 7),
    state: { waiting: { reason: "CrashLoopBackOff", message: "back-off 2m40s restarting" } },
    lastState: { terminated: { exitCode: 1, reason: "Error", finishedAt: iso(30_000) } },
  };
  return makePod({
    name: "uploader",
    uid: `uid-${nodeName}-uploader`,
    containers: [makeContainer({ name: "worker", command: ["sh", "-c", "exit 1"] })],
    spec: { nodeName },
    status: { phase: "Running", startTime: iso(600_000), containerStatuses: [crash] },
  });
}

function event(
  nodeName: string,
  pod: string,
  reason: string,
  message: string,
  warn = false,
): Event {
  return {
    apiVersion: "v1",
    kind: "Event",
    metadata: { name: `${pod}.${reason}.${nodeName}`, namespace: "default" },
    involvedObject: { kind: "Pod", name: pod, namespace: "default" },
    reason,
    message,
    type: warn ? "Warning" : "Normal",
    source: { component: "fleetlet", host: nodeName },
    count: warn ? 7 : 1,
    firstTimestamp: iso(120_000),
    lastTimestamp: iso(20_000),
  };
}

/** A joined, connected, welcomed protocol-level agent for `name`. */
async function agent(name: string): Promise<ProtocolClient> {
  const c = new ProtocolClient(hub.url, await hub.credentialFor(name));
  agents.push(c);
  await c.opened;
  c.send({ type: "hello", protocolVersion: 1, nodeName: name, agentVersion: "e2e", streamId: "s" });
  await c.waitFor("welcome");
  return c;
}

function send(c: ProtocolClient, name: string, msg: Record<string, unknown>): void {
  const seq = (seqs.get(name) ?? 0) + 1;
  seqs.set(name, seq);
  c.send({ ...msg, seq });
}

function shot(name: string): Promise<Buffer> {
  return page.screenshot({ path: join(SHOTS, `fleetlet-dashboard-${name}.png`), fullPage: true });
}

function row(text: string) {
  return page.locator("tr", { hasText: text });
}

describe("fleetlet hub dashboard (compiled hub, headless Chromium; no root, no test bed)", () => {
  beforeAll(async () => {
    await hub.start();
    profileDir = mkdtempSync(join(tmpdir(), "fleetlet-chromium-"));
    context = await chromium.launchPersistentContext(profileDir, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport: { width: 1280, height: 860 },
      colorScheme: "light",
    });
    context.setDefaultTimeout(UI_TIMEOUT);
    page = context.pages()[0] ?? (await context.newPage());
  }, 30_000);

  afterAll(async () => {
    for (const c of agents) c.close();
    await context?.close();
    await hub.cleanup();
    if (profileDir !== "") rmSync(profileDir, { recursive: true, force: true });
  }, 20_000);

  test("the page and its files are served by the hub without a token, with a strict CSP", async () => {
    const res = await fetch(`${hub.url}/`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-security-policy")).toContain("default-src 'none'");
    expect(await res.text()).toContain('src="/ui/app.js"');
    expect((await fetch(`${hub.url}/ui/app.js`)).headers.get("content-type")).toStartWith(
      "text/javascript",
    );
    expect((await fetch(`${hub.url}/ui/missing.js`)).status).toBe(404);
    expect((await fetch(`${hub.url}/`, { method: "POST" })).status).toBe(405);
  });

  test("a wrong operator token is refused with a clear message; the right one opens the fleet", async () => {
    const requests: string[] = [];
    page.on("request", (r) => requests.push(r.url()));
    await page.goto(hub.url);
    await page.fill("#token", "flo_not-the-token");
    await page.click("#login button[type=submit]");
    // The message appears when the hub's answer arrives: wait for it, do not read it at once.
    await page.locator("#login-error", { hasText: "The hub refused this token" }).waitFor();
    await shot("login");
    await page.fill("#token", hub.operatorToken);
    await page.click("#login button[type=submit]");
    await page.locator("h1", { hasText: "Fleet" }).waitFor();
    await page.locator("#conn.conn-live").waitFor();
    await page.getByText("No device has joined yet").waitFor();
    expect(requests.every((u) => u.startsWith(hub.url) || u.startsWith("ws://127.0.0.1"))).toBe(
      true,
    );
  });

  test("a device appears and its pod goes Running on the open page, without reload", async () => {
    let loads = 0;
    page.on("load", () => loads++);
    const cam = await agent("cam-1");
    send(cam, "cam-1", { type: "node", node: node("cam-1", true) });
    await row("cam-1").getByText("Ready").waitFor();
    send(cam, "cam-1", {
      type: "pod.upsert",
      uid: "uid-cam-1-camera",
      pod: cameraPod("cam-1", "Pending"),
    });
    await row("cam-1").getByText("0/1").waitFor();
    send(cam, "cam-1", {
      type: "event",
      event: event(
        "cam-1",
        "camera",
        "Pulled",
        'Container image "busybox:1.36" already present on machine',
      ),
    });
    send(cam, "cam-1", {
      type: "pod.upsert",
      uid: "uid-cam-1-camera",
      pod: cameraPod("cam-1", "Running"),
    });
    await row("cam-1").getByText("1/1").waitFor();
    await page.locator("#sum-pods .card-value", { hasText: /^1 \/ 1$/ }).waitFor();

    const gate = await agent("gate-2");
    send(gate, "gate-2", { type: "node", node: node("gate-2", false, "amd64") });
    send(gate, "gate-2", {
      type: "pod.upsert",
      uid: "uid-gate-2-uploader",
      pod: crashingPod("gate-2"),
    });
    send(gate, "gate-2", {
      type: "event",
      event: event(
        "gate-2",
        "uploader",
        "BackOff",
        'Back-off restarting failed container "worker" <img src=x onerror="window.__pwned=1">',
        true,
      ),
    });
    const door = await agent("door-3");
    send(door, "door-3", { type: "node", node: node("door-3", true) });
    await row("door-3").getByText("Online").waitFor();
    door.close();
    await row("door-3").getByText("Offline").waitFor();
    await row("uploader").getByText("CrashLoopBackOff").waitFor();
    expect(loads).toBe(0);
    await shot("fleet");
  });

  test("text from devices is shown as text, never run as markup", async () => {
    await page.click("table.devices >> text=gate-2");
    const backoff = row("Back-off restarting");
    await backoff.waitFor();
    expect(await backoff.textContent()).toContain('<img src=x onerror="window.__pwned=1">');
    expect(await page.evaluate("typeof window.__pwned")).toBe("undefined");
    expect(await page.locator("main img").count()).toBe(0);
    await page.click("nav.crumbs >> text=Fleet");
    await page.locator("h1", { hasText: "Fleet" }).waitFor();
  });

  test("a device under pressure is flagged, and its evicted pod reads Evicted", async () => {
    const pump = await agent("pump-4");
    const pressured = node("pump-4", true);
    pressured.status.conditions = (pressured.status.conditions ?? []).map((c) =>
      c.type === "DiskPressure"
        ? {
            ...c,
            status: "True",
            reason: "FleetletHasDiskPressure",
            message: "fleetlet has disk pressure",
          }
        : c,
    );
    send(pump, "pump-4", { type: "node", node: pressured });
    const evicted = cameraPod("pump-4", "Running");
    evicted.metadata.uid = "uid-pump-4-camera";
    evicted.status = {
      ...evicted.status,
      phase: "Failed",
      reason: "Evicted",
      message: "The node was low on resource: ephemeral-storage. ",
      containerStatuses: [
        {
          ...running("web", false),
          state: { terminated: { exitCode: 137, reason: "Error", finishedAt: iso(5_000) } },
        },
      ],
    };
    send(pump, "pump-4", { type: "pod.upsert", uid: "uid-pump-4-camera", pod: evicted });
    await row("pump-4").getByText("DiskPressure").waitFor();
    await page.locator("#sum-ready", { hasText: "1 under pressure" }).waitFor();
    await page.click("table.devices >> text=pump-4");
    await page.locator(".head-badges", { hasText: "DiskPressure" }).waitFor();
    await row("camera").getByText("Evicted").waitFor();
    await shot("device-pressure");
    await page.click("nav.crumbs >> text=Fleet");
    await page.locator("h1", { hasText: "Fleet" }).waitFor();
  });

  test("the device page shows its pods, conditions, capacity and events", async () => {
    await page.click("table.devices >> text=cam-1");
    await page.locator("h1", { hasText: "cam-1" }).waitFor();
    expect(page.url()).toEndWith("#/nodes/cam-1");
    await row("camera").getByText("Running").waitFor();
    await row("KubeletHasSufficientMemory").waitFor();
    await row("memory").getByText("3.7 GiB").first().waitFor();
    // Devices (extended resources): capacity counts every one, allocatable the healthy ones.
    expect(await row("fleetlet.io/serial").locator("td").allTextContents()).toEqual([
      "fleetlet.io/serial",
      "3",
      "2",
    ]);
    // The same through the hub's Kubernetes API, which kubectl reads.
    const node = (await (await hub.api("/api/v1/nodes/cam-1")).json()) as {
      status: { capacity: Record<string, string>; allocatable: Record<string, string> };
    };
    expect(node.status.capacity["fleetlet.io/serial"]).toBe("3");
    expect(node.status.allocatable["fleetlet.io/serial"]).toBe("2");
    await page.getByText("Debian GNU/Linux 12 (bookworm)").waitFor();
    await row("Pulled").waitFor();
    await shot("device");
  });

  test("the pod view shows its containers, probes, readiness and events", async () => {
    await page.click("table.pods >> text=camera");
    await page.locator("h1", { hasText: "camera" }).waitFor();
    expect(page.url()).toEndWith("#/nodes/cam-1/pods/default/camera");
    const web = page.locator("article.container", { hasText: "web" });
    await web.getByText("Running").first().waitFor();
    await web.getByText("Ready", { exact: true }).waitFor();
    await web.getByText("HTTP GET :8080/healthz every 5s").waitFor();
    await web.locator(".probes li", { hasText: "Readiness" }).getByText("Passing").waitFor();
    await row("Pulled").waitFor();
    await shot("pod");
  });

  test("the page reconnects after a hub restart and shows what changed", async () => {
    await page.goto(`${hub.url}/#/`);
    await page.locator("#conn.conn-live").waitFor();
    await hub.stop();
    await page.locator("#conn.conn-reconnecting").waitFor();
    await hub.start();
    await page.locator("#conn.conn-live").waitFor({ timeout: 15_000 });
    await row("cam-1").getByText("Offline").waitFor({ timeout: 10_000 });
  }, 30_000);

  test("dark mode and a phone-sized screen keep the layout readable", async () => {
    await page.emulateMedia({ colorScheme: "dark" });
    await page.goto(`${hub.url}/#/nodes/gate-2`);
    await page.locator("h1", { hasText: "gate-2" }).waitFor();
    await shot("device-dark");
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${hub.url}/#/`);
    await page.locator("h1", { hasText: "Fleet" }).waitFor();
    await row("gate-2").first().waitFor();
    await shot("fleet-phone-dark");
    const overflow = await page.evaluate<number>(
      "document.documentElement.scrollWidth - innerWidth",
    );
    expect(overflow).toBeLessThanOrEqual(0);
  });
});
