// Agent updates on the dashboard, in headless Chromium against the compiled hub: a signed copy of
// dist/fleetlet pushed as a release, two devices spoken at the protocol level (one takes updates,
// one is older and does not), `fleetlet hub update NODE --version V`, and the statuses its agent
// reports. The Agent column and the Agent versions panel follow them, live; the device's Agent
// section shows the update; an agent rollout made with `fleetlet hub upgrade` is drawn as the
// hub's API shows it. No root, no test bed. Screenshots go to the OS temp dir (fleetlet-dashboard-agent-*.png).
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium, type Locator, type Page } from "playwright-core";
import { nodeArch, nodeReport, ProtocolClient, TestHub } from "../lib/hub.ts";
import { eventually, fleetletBin } from "../lib/testbed.ts";

const CHROMIUM = "/usr/bin/chromium";
const CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"];
/** The page asks for updates on each redraw, at most every 3 s, and redraws at least every 5 s. */
const UI_TIMEOUT = 12_000;
setDefaultTimeout(30_000);

const dir = mkdtempSync(join(tmpdir(), "dashboard-agent-"));
const exe = join(dir, "fleetlet");
const arch = nodeArch;
const VERSION = "9.9.9-dash";
const hub = new TestHub(["--heartbeat-interval", "2s"]);
const agents: ProtocolClient[] = [];
const pageErrors: string[] = [];
const credentials = new Map<string, string>();
let profileDir = "";
let context: BrowserContext;
let page: Page;

function hubCli(...args: string[]) {
  const p = Bun.spawnSync(
    [fleetletBin, "hub", ...args, "--hub", hub.url, "--token", hub.operatorToken],
    { stdout: "pipe", stderr: "pipe" },
  );
  return { code: p.exitCode, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
}

/** A device at the protocol level: hello with `version` (and "updates" when `updates`), then
 * its Node running fleetlet/`version` on this machine's arch. */
async function device(name: string, version: string, updates: boolean): Promise<ProtocolClient> {
  const credential = credentials.get(name) ?? (await hub.credentialFor(name));
  credentials.set(name, credential);
  const c = new ProtocolClient(hub.url, credential);
  agents.push(c);
  await c.opened;
  c.send({
    type: "hello",
    protocolVersion: 1,
    nodeName: name,
    agentVersion: version,
    streamId: `s-${version}`,
    ...(updates && { features: ["updates"] }),
  });
  await c.waitFor("welcome");
  c.send(nodeReport(name, version, true));
  return c;
}

/** The text of each cell of each row `rows` finds. */
type Row = { cells: ArrayLike<{ textContent: string | null }> };
const cellTexts = (rows: Locator) =>
  rows.evaluateAll((trs) =>
    trs.map((r) => Array.from((r as unknown as Row).cells, (c) => c.textContent)),
  );
/** The Agent versions panel's rows. */
const versionRows = () => cellTexts(page.locator("#agent-versions table.agent-versions tbody tr"));
const row = (text: string) => page.locator("table.devices tr", { hasText: text });
const agentCell = (name: string) => row(name).locator("td[data-label=Agent]");
const shot = (name: string) =>
  page.screenshot({ path: join(tmpdir(), `fleetlet-dashboard-agent-${name}.png`), fullPage: true });

beforeAll(async () => {
  copyFileSync(fleetletBin, exe);
  const key = join(dir, "ops");
  expect(Bun.spawnSync([fleetletBin, "release", "keygen", "--out", key]).exitCode).toBe(0);
  const sign = Bun.spawnSync([
    fleetletBin,
    ...["release", "sign", "--key", `${key}.key`, "--version", VERSION, exe],
  ]);
  expect(sign.stderr.toString()).toBe("");
  hub.port = 20_000 + Math.floor(Math.random() * 12_000);
  await hub.start();
  expect(hubCli("release", "push", exe, "--signature", `${exe}.sig`).stderr).toBe("");
  profileDir = mkdtempSync(join(tmpdir(), "fleetlet-chromium-"));
  context = await chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1280, height: 900 },
    colorScheme: "light",
  });
  context.setDefaultTimeout(UI_TIMEOUT);
  page = context.pages()[0] ?? (await context.newPage());
  page.on("pageerror", (e) => pageErrors.push(e.message));
}, 180_000);

afterAll(async () => {
  for (const c of agents) c.close();
  await context?.close();
  await hub.cleanup();
  if (profileDir !== "") rmSync(profileDir, { recursive: true, force: true });
  rmSync(dir, { recursive: true, force: true });
}, 20_000);

describe("agent updates on the dashboard (compiled hub, headless Chromium; no root)", () => {
  let cam: ProtocolClient;

  test("the Agent column shows each device's version, and Agent versions counts them", async () => {
    cam = await device("cam-upd", "0.1.0", true);
    await device("gate-old", "0.0.9", false);
    await page.goto(hub.url);
    await page.fill("#token", hub.operatorToken);
    await page.click("#login button[type=submit]");
    await page.locator("#conn.conn-live").waitFor();
    await agentCell("cam-upd").getByText("0.1.0", { exact: true }).waitFor();
    await agentCell("gate-old").getByText("0.0.9", { exact: true }).waitFor();
    await page.locator("#agent-versions table.agent-versions tbody tr").nth(1).waitFor();
    expect(await versionRows()).toEqual([
      ["0.1.0", "1", "50 %"],
      ["0.0.9", "1", "50 %"],
    ]);
  });

  test("an update set with the CLI shows as pending, then the agent's progress, live", async () => {
    expect(hubCli("update", "cam-upd", "--version", VERSION).stderr).toBe("");
    await agentCell("cam-upd").getByText(`0.1.0 → ${VERSION} pending`).waitFor();
    const progress = (bytes: number) =>
      cam.send({
        type: "update.status",
        version: VERSION,
        phase: "downloading",
        bytes,
        total: 100,
      });
    progress(43);
    await agentCell("cam-upd").getByText(`0.1.0 → ${VERSION} downloading 43%`).waitFor();
    expect(await agentCell("cam-upd").locator(".badge-warn").count()).toBe(1);
    await shot("downloading");
    // Progress does not change the Node (its annotation is "<phase> <version>"): it is polled.
    progress(87);
    await agentCell("cam-upd").getByText(`0.1.0 → ${VERSION} downloading 87%`).waitFor();
    cam.send({
      type: "update.status",
      version: VERSION,
      phase: "rolled-back",
      reason: "crashed",
      message: "the new agent exited 3 times at start",
    });
    await agentCell("cam-upd").getByText(`0.1.0 → ${VERSION} rolled back: crashed`).waitFor();
    expect(await agentCell("cam-upd").locator(".badge-bad").getAttribute("title")).toBe(
      "the new agent exited 3 times at start",
    );
    expect(await agentCell("gate-old").textContent()).toBe("0.0.9");
  });

  test("the agent back on the new version and healthy: the row and the versions panel follow", async () => {
    cam.close();
    cam = await device("cam-upd", VERSION, true);
    cam.send({ type: "update.status", version: VERSION, phase: "healthy" });
    await agentCell("cam-upd").getByText(`${VERSION} healthy`).waitFor();
    await page.locator("#agent-versions tbody tr", { hasText: VERSION }).waitFor();
    expect(await versionRows()).toEqual([
      [VERSION, "1", "50 %"],
      ["0.0.9", "1", "50 %"],
    ]);
    await shot("fleet");
  });

  test("the device's page has an Agent section: version, arch, wanted, phase, when reported", async () => {
    await page.click("table.devices >> text=cam-upd");
    const section = page.locator("#agent");
    await section.locator("dd", { hasText: "healthy" }).waitFor();
    const facts = await section.locator("dt, dd").allInnerTexts();
    const pairs = Object.fromEntries(
      facts.flatMap((t, i) => (i % 2 === 0 ? [[t, facts[i + 1]]] : [])),
    );
    expect(pairs).toMatchObject({
      Version: VERSION,
      Architecture: arch,
      Phase: "healthy",
    });
    expect(pairs.Wanted).toStartWith(`${VERSION} · set `);
    expect(pairs.Reported).toMatch(/^\d+s ago$/);
    await shot("device");
    await page.click("nav.crumbs >> text=Fleet");
    await page.locator("h1", { hasText: "Fleet" }).waitFor();
  });

  test("an agent rollout made with hub upgrade is drawn in #agent-rollouts as the hub's API shows it", async () => {
    const before = await hub.api("/api/v1/agentrollouts");
    expect(before.status).toBe(200);
    expect(((await before.json()) as { items: unknown[] }).items).toEqual([]);
    const made = hubCli("upgrade", "eu", "--version", VERSION);
    expect(made.stderr).toBe("");
    expect(made.stdout).toContain("agentrollout/eu created");
    const eu = page.locator("#agent-rollouts article[data-rollout=eu]");
    type View = {
      phase: string;
      counts: Record<"members" | "updated" | "healthy" | "unavailable" | "offline", number>;
      nodes: { node: string }[];
    };
    // The page and the API agree (the controller moves on between polls: asked until they do).
    await eventually(
      "the panel to show the rollout as the API does",
      async () => {
        const v = (await (await hub.api("/api/v1/agentrollouts/eu")).json()) as View;
        const c = v.counts;
        const counts = `${c.members} nodes · ${c.updated} updated · ${c.healthy} healthy · ${c.unavailable} unavailable · ${c.offline} offline`;
        if ((await eu.count()) === 0) return undefined;
        const shown = await eu.locator(".rollout-counts").textContent();
        const badge = await eu.locator(".badge", { hasText: v.phase }).count();
        const nodes = (await cellTexts(eu.locator("table.rollout-nodes tbody tr"))).map(
          (r) => r[0],
        );
        const same =
          shown === counts &&
          badge > 0 &&
          [...nodes].sort().join() ===
            v.nodes
              .map((n) => n.node)
              .sort()
              .join();
        return same || undefined;
      },
      UI_TIMEOUT,
      500,
    );
    expect(await page.locator("main .error").count()).toBe(0);
    expect(pageErrors).toEqual([]);
    await shot("rollouts");
  });
});
