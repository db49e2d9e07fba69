// The dashboard's reading of agent updates and agent rollouts (src/hub/dashboard/agent-model.js,
// plain browser JS) and its poller of the operator API (poll.js): a node's update, as the hub's
// NodeUpdates views it, in one line; devices per version; rollout members in attention order; an
// API that answers 404 is left alone.
import { describe, expect, test } from "bun:test";
import {
  agentRolloutState,
  agentText,
  countsText,
  rolloutNodeState,
  rolloutNodesByAttention,
  runningVersion,
  updateState,
  versionCounts,
} from "../../../src/hub/dashboard/agent-model.js";
import { HttpError, poller } from "../../../src/hub/dashboard/poll.js";
import type { NodeUpdateView } from "../../../src/hub/updates/updates.ts";
import type { UpdateStatus } from "../../../src/protocol/index.ts";
import { updateHub } from "../../lib/hub-updates.ts";

type KObject = Parameters<typeof agentText>[0];

const node = (name: string, kubeletVersion?: string): KObject => ({
  metadata: { name },
  spec: {},
  status: { nodeInfo: kubeletVersion === undefined ? {} : { kubeletVersion } },
});

/** cam-1's update as the hub's NodeUpdates views it: `wanted` set (or none), then `statuses`
 * reported by its agent; the hub holds release 0.2.0 for `releaseArch` (cam-1 is arm64). */
async function hubView(
  wanted: string | undefined,
  statuses: Omit<UpdateStatus, "type">[],
  releaseArch: "arm64" | "amd64" = "arm64",
): Promise<NodeUpdateView> {
  const h = await updateHub();
  h.releases.add("0.2.0", releaseArch);
  if (wanted !== undefined) await h.updates.set("cam-1", wanted);
  for (const s of statuses) h.updates.report("cam-1", { type: "update.status", ...s });
  const [v] = await h.updates.views("cam-1");
  if (v === undefined) throw new Error("no view of cam-1");
  return v;
}

describe("a device's Agent column, from the hub's view of its update", () => {
  const cam = node("cam-1", "fleetlet/0.1.0");
  test.each<[string, string | undefined, Omit<UpdateStatus, "type">[], string]>([
    ["nothing wanted, nothing reported", undefined, [], "0.1.0"],
    ["wanted, not reported yet", "0.2.0", [], "0.1.0 → 0.2.0 pending"],
    [
      "downloading",
      "0.2.0",
      [{ version: "0.2.0", phase: "downloading", bytes: 43, total: 100 }],
      "0.1.0 → 0.2.0 downloading 43%",
    ],
    [
      "downloading, no total yet",
      "0.2.0",
      [{ version: "0.2.0", phase: "downloading", bytes: 0 }],
      "0.1.0 → 0.2.0 downloading",
    ],
    [
      "restarting",
      "0.2.0",
      [{ version: "0.2.0", phase: "restarting" }],
      "0.1.0 → 0.2.0 restarting",
    ],
    [
      "rolled back by the launcher",
      "0.2.0",
      [{ version: "0.2.0", phase: "rolled-back", reason: "crashed", message: "exit 2 at start" }],
      "0.1.0 → 0.2.0 rolled back: crashed",
    ],
    [
      "refused",
      "0.2.0",
      [{ version: "0.2.0", phase: "refused", reason: "signature" }],
      "0.1.0 → 0.2.0 refused: signature",
    ],
    [
      "failed",
      "0.2.0",
      [{ version: "0.2.0", phase: "failed", reason: "sha256" }],
      "0.1.0 → 0.2.0 failed: sha256",
    ],
    [
      "a status of an earlier release",
      "0.2.0",
      [{ version: "0.1.5", phase: "healthy" }],
      "0.1.0 → 0.2.0 healthy (0.1.5, stale)",
    ],
    [
      "a status kept after the wish was canceled",
      undefined,
      [{ version: "0.2.0", phase: "rolled-back", reason: "unhealthy" }],
      "0.1.0 rolled back (0.2.0, stale)",
    ],
  ])("%s", async (_, wanted, statuses, text) => {
    expect(agentText(cam, await hubView(wanted, statuses))).toBe(text);
  });

  test("a release the hub cannot offer for the device's arch reads as the hub's problem", async () => {
    const v = await hubView("0.2.0", [], "amd64");
    expect(agentText(cam, v)).toBe("0.1.0 → 0.2.0 no release 0.2.0 for arm64");
    expect(updateState(v)?.tone).toBe("warn");
  });

  test("healthy on the new version: the version the agent said hello with, and healthy", () => {
    const v: NodeUpdateView = {
      node: "cam-1",
      running: "0.2.0",
      wanted: "0.2.0",
      phase: "healthy",
    };
    expect(agentText(cam, v)).toBe("0.2.0 healthy");
    expect(updateState(v)).toEqual({ label: "healthy", tone: "ok" });
  });

  test("tones: moving is warn, taken is ok, not taken is bad, the agent's sentence is the title", async () => {
    const at = async (s: Omit<UpdateStatus, "type">) =>
      updateState(await hubView("0.2.0", [s]))?.tone;
    expect(await at({ version: "0.2.0", phase: "downloading" })).toBe("warn");
    expect(await at({ version: "0.2.0", phase: "restarting" })).toBe("warn");
    expect(await at({ version: "0.2.0", phase: "refused" })).toBe("bad");
    expect(await at({ version: "0.2.0", phase: "rolled-back" })).toBe("bad");
    const v = await hubView("0.2.0", [{ version: "0.2.0", phase: "failed", message: "disk full" }]);
    expect(updateState(v)?.title).toBe("disk full");
  });

  test("the running version: the hub's (hello) before the Node's kubeletVersion", () => {
    expect(runningVersion(cam, { node: "cam-1", running: "0.3.0" })).toBe("0.3.0");
    expect(runningVersion(cam, undefined)).toBe("0.1.0");
    expect(runningVersion(node("x"), undefined)).toBeUndefined();
    expect(agentText(node("x"), undefined)).toBe("unknown");
  });
});

describe("Agent versions", () => {
  test("counts devices per running version, newest first (numerically), unknown last", () => {
    const nodes = [
      node("a", "fleetlet/0.9.0"),
      node("b", "fleetlet/0.10.0"),
      node("c"),
      node("d", "fleetlet/0.9.0"),
      node("e", "fleetlet/0.9.0"),
    ];
    const updates = new Map([["e", { node: "e", running: "0.10.0" }]]);
    expect(versionCounts(nodes, updates)).toEqual([
      { version: "0.10.0", nodes: 2 },
      { version: "0.9.0", nodes: 2 },
      { version: "unknown", nodes: 1 },
    ]);
    expect(versionCounts([], new Map())).toEqual([]);
  });
});

describe("agent rollouts", () => {
  test("phases as badges", () => {
    expect(agentRolloutState("Complete")).toEqual({ label: "Complete", tone: "ok" });
    expect(agentRolloutState("Canary")).toEqual({ label: "Canary", tone: "warn" });
    expect(agentRolloutState("Rolling")).toEqual({ label: "Rolling", tone: "warn" });
    expect(agentRolloutState("Failed")).toEqual({ label: "Failed", tone: "bad" });
    expect(agentRolloutState("Paused")).toEqual({ label: "Paused", tone: "none" });
    expect(agentRolloutState("RolledBack")).toEqual({ label: "Rolled back", tone: "warn" });
  });

  test("a member reads its last status, else pending once wanted, else waiting", () => {
    expect(rolloutNodeState({ node: "a", online: true, phase: "healthy" }, "0.2.0").label).toBe(
      "healthy",
    );
    expect(rolloutNodeState({ node: "a", online: true, wanted: "0.2.0" }, "0.2.0").label).toBe(
      "pending",
    );
    expect(rolloutNodeState({ node: "a", online: true, running: "0.1.0" }, "0.2.0").label).toBe(
      "waiting",
    );
  });

  test("members that failed come first, then moving, waiting, and done; by name within", () => {
    const order = rolloutNodesByAttention([
      { node: "h2", online: true, phase: "healthy" },
      { node: "w", online: true },
      { node: "h1", online: true, phase: "done" },
      { node: "d", online: true, phase: "downloading" },
      { node: "r", online: false, phase: "rolled-back", reason: "crashed" },
      { node: "f", online: true, phase: "refused" },
    ]).map((n) => n.node);
    expect(order).toEqual(["f", "r", "d", "w", "h1", "h2"]);
  });

  test("counts in one line", () => {
    expect(countsText({ members: 5, updated: 2, healthy: 1, unavailable: 1, offline: 0 })).toBe(
      "5 nodes · 2 updated · 1 healthy · 1 unavailable · 0 offline",
    );
    expect(countsText({ members: 1, updated: 0, healthy: 0, unavailable: 0, offline: 1 })).toBe(
      "1 node · 0 updated · 0 healthy · 0 unavailable · 1 offline",
    );
  });
});

/** An api whose answers the test gives, one request at a time. */
function manualApi() {
  const asked: string[] = [];
  const pending: { resolve(v: unknown): void; reject(e: unknown): void }[] = [];
  const api = (path: string) => {
    asked.push(path);
    return new Promise((resolve, reject) => pending.push({ resolve, reject }));
  };
  const settle = () => new Promise((r) => setImmediate(r));
  return { api, asked, pending, settle };
}

describe("poller()", () => {
  test("asks at most every everyMs, within soonMs once told the answer changed, and keeps the last answer", async () => {
    const m = manualApi();
    let changes = 0;
    const p = poller<{ n: number }>(
      m.api,
      "/x",
      () => ({ everyMs: 3000, soonMs: 500 }),
      () => changes++,
    );
    p.refresh(1000);
    p.refresh(1001);
    expect(m.asked).toEqual(["/x"]);
    m.pending.shift()?.resolve({ n: 1 });
    await m.settle();
    expect(p.value).toEqual({ n: 1 });
    expect(changes).toBe(1);
    p.refresh(1499, true);
    expect(m.asked).toHaveLength(1);
    p.refresh(1500);
    expect(m.asked).toHaveLength(2);
    m.pending.shift()?.reject(new HttpError(500, "/x"));
    await m.settle();
    expect(p.value).toEqual({ n: 1 });
    expect(p.error).toBe("HTTP 500 for /x");
    p.refresh(4499);
    expect(m.asked).toHaveLength(2);
    p.refresh(4500);
    expect(m.asked).toHaveLength(3);
  });

  test("reads its pace at each refresh (a fleet that grew is asked less often)", async () => {
    const m = manualApi();
    let pace = { everyMs: 3000, soonMs: 0 };
    const p = poller(
      m.api,
      "/x",
      () => pace,
      () => {},
    );
    p.refresh(0);
    m.pending.shift()?.resolve({});
    await m.settle();
    pace = { everyMs: 15_000, soonMs: 5000 };
    p.refresh(3000);
    p.refresh(4999, true);
    expect(m.asked).toHaveLength(1);
    p.refresh(5000);
    expect(m.asked).toHaveLength(2);
  });

  test("an answer that changed while a request is under way is asked again after it", async () => {
    const m = manualApi();
    const p = poller(
      m.api,
      "/x",
      () => ({ everyMs: 3000, soonMs: 0 }),
      () => {},
    );
    p.refresh(0);
    p.refresh(1, true);
    expect(m.asked).toHaveLength(1);
    m.pending.shift()?.resolve({});
    await m.settle();
    expect(m.asked).toHaveLength(2);
  });

  test("a 404 marks the API absent, with no error, and it is not asked again", async () => {
    const m = manualApi();
    const p = poller(
      m.api,
      "/api/v1/agentrollouts",
      () => ({ everyMs: 3000, soonMs: 0 }),
      () => {},
    );
    p.refresh(0);
    m.pending.shift()?.reject(new HttpError(404, "/api/v1/agentrollouts"));
    await m.settle();
    expect(p.absent).toBe(true);
    expect(p.error).toBeUndefined();
    expect(p.value).toBeUndefined();
    p.refresh(10_000, true);
    expect(m.asked).toHaveLength(1);
  });
});
