// The dashboard's agent panels (src/hub/dashboard/agent-view.js) drawn into a small fake DOM
// (test/lib/fake-dom.ts): the Agent rollouts panel from fixture data of the documented view
// (docs/hub-releases.md, "Rolling a release out to a fleet"), the Agent versions panel, a device
// row's Agent cell and a device's Agent section. The real page is checked in Chromium by
// test/e2e/dashboard-agent.test.ts.
import { afterAll, describe, expect, test } from "bun:test";
import type { AgentRollout, NodeUpdate } from "../../../src/hub/dashboard/agent-model.js";
import type { KObject } from "../../../src/hub/dashboard/model.js";
import type { NodeUpdateView } from "../../../src/hub/updates/updates.ts";
import { cellTexts, type FakeElement, installFakeDom } from "../../lib/fake-dom.ts";

/** The module is imported by a path tsc does not follow: it draws with the DOM's types, which
 * the project's tsconfig (Bun's) does not have; `tsc -p src/hub/dashboard` checks it. */
const VIEW = "../../../src/hub/dashboard/agent-view.js";
const { agentCell, agentSection, rolloutsPanel, versionsPanel } = (await import(VIEW)) as {
  agentCell(node: KObject, u: NodeUpdate | undefined): unknown;
  agentSection(
    node: KObject,
    u: NodeUpdate | undefined,
    error: string | undefined,
    now: number,
  ): unknown;
  rolloutsPanel(rollouts: AgentRollout[], now: number): unknown;
  versionsPanel(nodes: KObject[], updates: Map<string, NodeUpdate>): unknown;
};

// Installed as the file loads: the describe blocks below draw while they are collected.
const uninstall = installFakeDom();
afterAll(() => uninstall());

const NOW = Date.parse("2026-06-01T12:00:00Z");
const el = (x: unknown) => x as FakeElement;
const node = (name: string, kubeletVersion: string, arch = "arm64"): KObject => ({
  metadata: { name },
  spec: {},
  status: { nodeInfo: { kubeletVersion, architecture: arch } },
});

/** Two rollouts as GET /api/v1/agentrollouts lists them: eu rolling (one member failed and
 * rolled back, one downloading), lab complete. */
const rollouts: AgentRollout[] = [
  {
    metadata: { name: "lab", creationTimestamp: "2026-06-01T10:00:00Z" },
    spec: { version: "0.2.0", selector: "tier=lab", canary: 1, maxUnavailable: 1 },
    phase: "Complete",
    message: "1 of 1 updated nodes are healthy",
    paused: false,
    counts: { members: 1, updated: 1, healthy: 1, unavailable: 0, offline: 0 },
    nodes: [
      {
        node: "lab-1",
        online: true,
        running: "0.2.0",
        from: "0.1.9",
        wanted: "0.2.0",
        phase: "healthy",
      },
    ],
  },
  {
    metadata: { name: "eu", creationTimestamp: "2026-06-01T11:55:00Z" },
    spec: {
      version: "0.2.0",
      selector: "region=eu",
      canary: 1,
      maxUnavailable: "25%",
      progressDeadlineSeconds: 600,
      autoRollback: true,
    },
    phase: "Failed",
    message: 'node "eu-2" rolled back: crashed',
    paused: false,
    failed: { node: "eu-2", message: "rolled back: crashed", rolledBack: true },
    counts: { members: 4, updated: 2, healthy: 1, unavailable: 1, offline: 1 },
    nodes: [
      {
        node: "eu-1",
        online: true,
        running: "0.2.0",
        from: "0.1.9",
        wanted: "0.2.0",
        phase: "healthy",
      },
      { node: "eu-4", online: false, running: "0.1.9" },
      {
        node: "eu-3",
        online: true,
        running: "0.1.9",
        from: "0.1.9",
        wanted: "0.2.0",
        phase: "downloading",
      },
      {
        node: "eu-2",
        online: true,
        running: "0.1.9",
        from: "0.1.9",
        wanted: "0.1.9",
        phase: "rolled-back",
        reason: "crashed",
      },
    ],
  },
];

describe("the Agent rollouts panel", () => {
  const panel = el(rolloutsPanel(rollouts, NOW));

  test("is #agent-rollouts with one article per rollout, by name", () => {
    expect(panel.id).toBe("agent-rollouts");
    expect(panel.querySelector("h2")?.textContent).toBe("Agent rollouts (2)");
    expect(panel.querySelectorAll("article").map((a) => a.getAttribute("data-rollout"))).toEqual([
      "eu",
      "lab",
    ]);
  });

  test("an article shows the phase, version, selector, message, counts and why it stopped", () => {
    const eu = panel.querySelector("article[data-rollout=eu]");
    expect(eu?.querySelector("header .badge")?.textContent).toBe("Failed");
    expect(eu?.querySelector("header .badge")?.className).toContain("badge-bad");
    expect(eu?.querySelector("header")?.textContent).toBe(
      "euFailedto 0.2.0 · region=eu · created 5m ago",
    );
    expect(eu?.querySelector(".rollout-message")?.textContent).toBe(
      'node "eu-2" rolled back: crashed',
    );
    expect(eu?.querySelector(".rollout-counts")?.textContent).toBe(
      "4 nodes · 2 updated · 1 healthy · 1 unavailable · 1 offline",
    );
    const failed = eu?.querySelector(".rollout-failed");
    expect(failed?.textContent).toBe(
      "Stopped at eu-2: rolled back: crashed (the nodes it moved are sent their previous version)",
    );
    expect(failed?.querySelector("a")?.getAttribute("href")).toBe("#/nodes/eu-2");
    const lab = panel.querySelector("article[data-rollout=lab]");
    expect(lab?.querySelector("header .badge")?.textContent).toBe("Complete");
    expect(lab?.querySelector(".rollout-failed")).toBeNull();
  });

  test("its table.rollout-nodes lists the members, those that need attention first", () => {
    const table = panel.querySelector("article[data-rollout=eu] table.rollout-nodes");
    if (table === null) throw new Error("no table.rollout-nodes");
    expect(table.querySelectorAll("th").map((th) => th.textContent)).toEqual([
      "Node",
      "Connection",
      "Running",
      "From",
      "Wanted",
      "Update",
    ]);
    expect(cellTexts(table)).toEqual([
      ["eu-2", "Online", "0.1.9", "0.1.9", "0.1.9", "rolled back: crashed"],
      ["eu-3", "Online", "0.1.9", "0.1.9", "0.2.0", "downloading"],
      ["eu-4", "Offline", "0.1.9", "—", "—", "waiting"],
      ["eu-1", "Online", "0.2.0", "0.1.9", "0.2.0", "healthy"],
    ]);
  });

  test("a paused rollout says so; with no rollout the panel says there is none", () => {
    const paused = { ...rollouts[1], phase: "Rolling", paused: true } as AgentRollout;
    const badges = el(rolloutsPanel([paused], NOW)).querySelectorAll("header .badge");
    expect(badges.map((b) => b.textContent)).toEqual(["Rolling", "Paused"]);
    const empty = el(rolloutsPanel([], NOW));
    expect(empty.querySelectorAll("article")).toHaveLength(0);
    expect(empty.querySelector(".empty")?.textContent).toBe("No agent rollout.");
  });
});

describe("the Agent versions panel", () => {
  test("counts the devices per version, with their share", () => {
    const nodes = [
      node("a", "fleetlet/0.1.9"),
      node("b", "fleetlet/0.1.9"),
      node("c", "fleetlet/0.1.9"),
      node("d", "fleetlet/0.1.9"),
    ];
    const panel = el(versionsPanel(nodes, new Map([["d", { node: "d", running: "0.2.0" }]])));
    expect(panel.id).toBe("agent-versions");
    const table = panel.querySelector("table.agent-versions");
    if (table === null) throw new Error("no table.agent-versions");
    expect(cellTexts(table)).toEqual([
      ["0.2.0", "1", "25 %"],
      ["0.1.9", "3", "75 %"],
    ]);
    expect(table.querySelector("progress")?.getAttribute("value")).toBe("1");
  });
});

describe("a device's agent", () => {
  const cam = node("cam-1", "fleetlet/0.1.9");
  const downloading: NodeUpdateView = {
    node: "cam-1",
    arch: "arm64",
    running: "0.1.9",
    wanted: "0.2.0",
    setAt: "2026-06-01T11:58:00Z",
    phase: "downloading",
    bytes: 43 * 1024 * 1024,
    total: 100 * 1024 * 1024,
    reportedAt: "2026-06-01T11:59:30Z",
  };

  test("its Agent cell: running → wanted and where the update stands", () => {
    const cell = el(agentCell(cam, downloading));
    expect(cell.textContent).toBe("0.1.9 → 0.2.0 downloading 43%");
    expect(cell.querySelector(".badge")?.className).toContain("badge-warn");
    expect(el(agentCell(cam, undefined)).textContent).toBe("0.1.9");
  });

  test("its Agent section: version, arch, wanted, phase, progress, reason, when reported", () => {
    const section = el(agentSection(cam, downloading, undefined, NOW));
    expect(section.id).toBe("agent");
    const dts = section.querySelectorAll("dt").map((d) => d.textContent);
    const dds = section.querySelectorAll("dd").map((d) => d.textContent);
    expect(Object.fromEntries(dts.map((k, i) => [k, dds[i]]))).toEqual({
      Version: "0.1.9",
      Architecture: "arm64",
      Wanted: "0.2.0 · set 2m ago",
      Phase: "downloading 43%",
      Progress: " 43 % (43 MiB of 100 MiB)",
      Reported: "30s ago",
    });
    const rolledBack = el(
      agentSection(
        cam,
        {
          ...downloading,
          phase: "rolled-back",
          reason: "unhealthy",
          message: "not healthy in 120s",
        },
        undefined,
        NOW,
      ),
    );
    const text = rolledBack.querySelectorAll("dd").map((d) => d.textContent);
    expect(text).toContain("rolled back: unhealthy");
    expect(text).toContain("unhealthy");
    expect(text).toContain("not healthy in 120s");
  });

  test("with no update, only the version and arch; an error before the first answer is shown", () => {
    const none = el(
      agentSection(cam, { node: "cam-1", arch: "arm64", running: "0.1.9" }, undefined, NOW),
    );
    expect(none.querySelectorAll("dt").map((d) => d.textContent)).toEqual([
      "Version",
      "Architecture",
    ]);
    expect(none.querySelector("p")?.textContent).toBe("No update wanted or reported.");
    const failed = el(agentSection(cam, undefined, "HTTP 500 for /x", NOW));
    expect(failed.querySelector(".error")?.textContent).toBe(
      "Cannot read its update: HTTP 500 for /x",
    );
  });
});
