// The dashboard's DaemonSet pages in headless Chromium, against the compiled hub and two
// protocol-level devices that run what they are sent (they report their pods Ready, or
// crash-looping): the revisions, which device is on which, and why a rollout stopped. No root,
// no test bed. A screenshot goes to the OS temp dir (fleetlet-dashboard-rollout.png).
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import type { Pod } from "../../src/api/types.ts";
import { reportedStatus } from "../lib/deploy.ts";
import { ProtocolClient, TestHub } from "../lib/hub.ts";
import { eventually } from "../lib/testbed.ts";

setDefaultTimeout(20_000);
const hub = new TestHub(["--heartbeat-interval", "2s", "--rollout-interval", "100ms"]);
const devices: { name: string; c: ProtocolClient; seq: number; crash: boolean }[] = [];
let profileDir = "";
let context: BrowserContext;
let page: Page;

/** A device that stores what it is sent and reports each pod Ready, or crash-looping. */
async function device(name: string): Promise<void> {
  const res = await hub.join(await hub.joinToken("1h", { site: "lab" }), name);
  const { credential } = (await res.json()) as { credential: string };
  const c = new ProtocolClient(hub.url, credential);
  await c.opened;
  const d = { name, c, seq: 0, crash: false };
  devices.push(d);
  c.send({
    type: "hello",
    protocolVersion: 1,
    nodeName: name,
    agentVersion: "e2e",
    streamId: "s",
    features: ["desired-pods"],
  });
  await c.waitFor("welcome");
}

/** Answers every desired state not answered yet, as a device that ran it. */
function runDesired(): void {
  for (const d of devices) {
    const all = d.c.received.filter((m) => m.type === "desired");
    const last = all.at(-1) as { generation: number; pods: Pod[] } | undefined;
    if (last === undefined || (d as { done?: number }).done === last.generation) continue;
    (d as { done?: number }).done = last.generation;
    d.c.send({ type: "desired.ack", generation: last.generation });
    for (const pod of last.pods) {
      const crash = pod.spec.containers[0]?.image.endsWith(":2");
      const status = reportedStatus(crash ?? false);
      d.seq += 1;
      d.c.send({ type: "pod.upsert", seq: d.seq, uid: pod.metadata.uid, pod: { ...pod, status } });
    }
  }
}

function daemonSet(image: string) {
  return {
    apiVersion: "apps/v1",
    kind: "DaemonSet",
    metadata: { name: "cam" },
    spec: {
      selector: { matchLabels: { app: "cam" } },
      template: {
        metadata: { labels: { app: "cam" } },
        spec: { nodeSelector: { site: "lab" }, containers: [{ name: "main", image }] },
      },
    },
  };
}

async function put(image: string): Promise<void> {
  const res = await hub.api("/apis/apps/v1/namespaces/default/daemonsets/cam", {
    method: "PUT",
    body: JSON.stringify(daemonSet(image)),
  });
  if (!res.ok) throw new Error(`PUT: HTTP ${res.status}: ${await res.text()}`);
}

async function phase(): Promise<string> {
  const res = await hub.api("/apis/apps/v1/namespaces/default/daemonsets/cam/rollout");
  return ((await res.json()) as { phase: string }).phase;
}

describe("fleetlet hub dashboard: DaemonSets (compiled hub, headless Chromium; no root, no test bed)", () => {
  beforeAll(async () => {
    await hub.start();
    await device("lab-1");
    await device("lab-2");
    profileDir = mkdtempSync(join(tmpdir(), "fleetlet-chromium-"));
    context = await chromium.launchPersistentContext(profileDir, {
      executablePath: "/usr/bin/chromium",
      headless: true,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
      viewport: { width: 1280, height: 860 },
    });
    context.setDefaultTimeout(8000);
    page = context.pages()[0] ?? (await context.newPage());
  }, 30_000);
  afterAll(async () => {
    for (const d of devices) d.c.close();
    await context?.close();
    await hub.cleanup();
    if (profileDir !== "") rmSync(profileDir, { recursive: true, force: true });
  }, 20_000);

  test("shows the revisions, which device is on which, and why a rollout stopped", async () => {
    await put("busybox:1");
    await eventually(
      "revision 1 rolled out",
      async () => {
        runDesired();
        return (await phase()) === "Complete";
      },
      10_000,
      100,
    );
    await put("busybox:2");
    await eventually(
      "revision 2 stopped",
      async () => {
        runDesired();
        return (await phase()) === "Failed";
      },
      10_000,
      100,
    );

    await page.goto(`${hub.url}/#/daemonsets`);
    await page.fill("#token", hub.operatorToken);
    await page.click("#login button[type=submit]");
    const row = page.locator("#daemonsets tr", { hasText: "cam" });
    await row.locator(".badge", { hasText: "Stopped" }).waitFor();
    expect(await row.textContent()).toContain("2 (stable 1)");
    await row.locator("a", { hasText: "cam" }).click();
    const stopped = page.locator("#rollout-stopped");
    await stopped.waitFor();
    const text = (await stopped.textContent()) ?? "";
    expect(text).toContain("Rollout of revision 2 stopped");
    expect(text).toMatch(
      /Device lab-[12]: pod "cam-lab-[12]": container "main" is crash-looping \(CrashLoopBackOff; last exit code 1, Error\)/,
    );
    expect(text).toContain("were sent revision 1 again");
    const revisions = await page.locator("table.revisions tbody tr").allTextContents();
    expect(revisions).toHaveLength(2);
    expect(revisions[0]).toMatch(/^2Current0—\d{4}-\d\d-\d\dT[\d:]+Z$/);
    expect(revisions[1]).toMatch(/^1Stable2—\d{4}-\d\d-\d\dT[\d:]+Z$/);
    const rows = await page.locator("table.rollout-devices tbody tr").allTextContents();
    expect(rows).toHaveLength(2);
    expect(
      rows.filter((r) => /^lab-[12]11Rolled backran revision 2, sent revision 1 again$/.test(r)),
    ).toHaveLength(1);
    expect(
      rows.filter((r) => /^lab-[12]11Heldthe rollout stopped before this device$/.test(r)),
    ).toHaveLength(1);
    await page.screenshot({
      path: join(tmpdir(), "fleetlet-dashboard-rollout.png"),
      fullPage: true,
    });
  });
});
