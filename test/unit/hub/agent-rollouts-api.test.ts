// The agent rollout routes through the hub's API entry (src/hub/api.ts, rollouts/api.ts): the
// operator only, the spec checked, 201 then 200 with what was done, pause/resume/undo, delete,
// and every action (refusals too) in the audit log, kind `agentrollout`.
import { describe, expect, test } from "bun:test";
import { type ApiDeps, handleApi } from "../../../src/hub/api.ts";
import { AgentRollouts } from "../../../src/hub/rollouts/controller.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { updateHub } from "../../lib/hub-updates.ts";

async function api() {
  const h = await updateHub();
  h.releases.add("0.2.0", "arm64");
  const agentRollouts = new AgentRollouts(
    {
      store: h.rolloutStore,
      nodes: () => [{ name: "cam-1", labels: { tier: "prod" } }],
      online: () => true,
      updates: h.updates,
      hasRelease: async (v) => (await h.releases.list()).some((r) => r.version === v),
      changed: () => {},
      clock: h.clock,
      log: nullLogger,
    },
    [],
  );
  const deps = {
    agentRollouts,
    fleet: h.fleet,
    identity: h.identity,
    audit: h.audit,
    clock: h.clock,
    maxBodyBytes: 64 * 1024,
  } as unknown as ApiDeps;
  const call = (method: string, path: string, body?: unknown, token = h.operatorToken) =>
    handleApi(
      deps,
      new Request(`http://hub${path}`, {
        method,
        headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      }),
      "10.0.0.9",
    );
  return { h, call };
}

const PATH = "/api/v1/agentrollouts/prod";

describe("/api/v1/agentrollouts", () => {
  test("a device's credential is refused (403), no token is 401", async () => {
    const { h, call } = await api();
    expect((await call("PUT", PATH, { version: "0.2.0" }, h.credential)).status).toBe(403);
    expect((await call("GET", "/api/v1/agentrollouts", undefined, h.credential)).status).toBe(403);
    expect((await call("PUT", PATH, { version: "0.2.0" }, "")).status).toBe(401);
    expect(h.updates.wantedFor("cam-1")).toBeUndefined();
  });

  test("PUT creates (201) with the spec defaulted, then changes (200), or leaves it unchanged", async () => {
    const { call } = await api();
    const created = await call("PUT", PATH, { version: "0.2.0", selector: "tier=prod" });
    expect(created.status).toBe(201);
    expect(created.headers.get("x-fleetlet-result")).toBe("created");
    const view = (await created.json()) as Record<string, unknown>;
    expect(view).toMatchObject({
      apiVersion: "fleetlet.io/v1",
      kind: "AgentRollout",
      metadata: { name: "prod", creationTimestamp: "2026-06-01T12:00:00Z" },
      spec: {
        version: "0.2.0",
        selector: "tier=prod",
        canary: 1,
        maxUnavailable: 1,
        progressDeadlineSeconds: 600,
        autoRollback: true,
      },
      phase: "Canary",
      paused: false,
      counts: { members: 1, updated: 1, healthy: 0, unavailable: 1, offline: 0 },
      nodes: [{ node: "cam-1", online: true, running: "0.1.0", from: "0.1.0", wanted: "0.2.0" }],
    });
    const same = await call("PUT", PATH, { version: "0.2.0", selector: "tier=prod" });
    expect([same.status, same.headers.get("x-fleetlet-result")]).toEqual([200, "unchanged"]);
    const changed = await call("PUT", PATH, { version: "0.2.0", maxUnavailable: "50%" });
    expect([changed.status, changed.headers.get("x-fleetlet-result")]).toEqual([200, "configured"]);
    const list = (await (await call("GET", "/api/v1/agentrollouts")).json()) as {
      kind: string;
      items: { metadata: { name: string } }[];
    };
    expect(list.kind).toBe("AgentRolloutList");
    expect(list.items.map((i) => i.metadata.name)).toEqual(["prod"]);
  });

  test.each([
    ["no version", {}, 400, "bad agent rollout"],
    [
      "a bad percent",
      { version: "0.2.0", maxUnavailable: "150%" },
      400,
      "a percent from 0% to 100%",
    ],
    ["a bad selector", { version: "0.2.0", selector: "a in b" }, 400, "selector"],
    ["a release not on the hub", { version: "9.9.9" }, 404, "release 9.9.9 not found"],
  ])("%s is refused, and audited", async (_what, body, status, text) => {
    const { h, call } = await api();
    const res = await call("PUT", PATH, body);
    expect(res.status).toBe(status);
    expect(await res.text()).toContain(text);
    expect((await h.audit.list()).map((r) => [r.kind, r.action, r.rollout])).toEqual([
      ["agentrollout", "create", "prod"],
    ]);
    expect((await h.audit.list())[0]?.outcome).toStartWith("refused: ");
  });

  test("an invalid name is 400; an unknown rollout is 404", async () => {
    const { call } = await api();
    expect((await call("PUT", "/api/v1/agentrollouts/Bad_Name", { version: "0.2.0" })).status).toBe(
      400,
    );
    expect((await call("GET", PATH)).status).toBe(404);
    expect((await call("POST", `${PATH}/pause`)).status).toBe(404);
    expect((await call("DELETE", PATH)).status).toBe(404);
  });

  test("pause, resume, undo and delete answer and are audited", async () => {
    const { h, call } = await api();
    await call("PUT", PATH, { version: "0.2.0" });
    expect(((await (await call("POST", `${PATH}/pause`)).json()) as { phase: string }).phase).toBe(
      "Paused",
    );
    expect(((await (await call("POST", `${PATH}/resume`)).json()) as { phase: string }).phase).toBe(
      "Canary",
    );
    expect(((await (await call("POST", `${PATH}/undo`)).json()) as { phase: string }).phase).toBe(
      "RolledBack",
    );
    expect(h.updates.wantedFor("cam-1")?.version).toBe("0.1.0");
    expect(await (await call("DELETE", PATH)).json()).toEqual({ name: "prod", deleted: true });
    expect(
      (await h.audit.list()).map((r) => `${r.action} ${r.rollout} ${r.release}: ${r.outcome}`),
    ).toEqual([
      "create prod 0.2.0: created",
      "pause prod 0.2.0: Paused",
      "resume prod 0.2.0: Canary",
      "undo prod 0.2.0: RolledBack",
      "delete prod 0.2.0: deleted",
    ]);
    expect((await call("GET", "/api/v1/agentrollouts/prod/pause")).status).toBe(405);
  });
});
