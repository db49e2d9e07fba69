// The per-node update routes through the hub's API entry (src/hub/api.ts, updates/api.ts): only
// the operator may set or cancel an update (a device's credential is refused), the body and the
// version are checked, every set and cancel is in the audit log, and a set offers at once.
import { describe, expect, test } from "bun:test";
import { type ApiDeps, handleApi } from "../../../src/hub/api.ts";
import { AgentRollouts } from "../../../src/hub/rollouts/controller.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { updateHub } from "../../lib/hub-updates.ts";

async function api() {
  const h = await updateHub();
  h.releases.add("0.2.0", "arm64");
  const changed: string[] = [];
  const agentRollouts = new AgentRollouts(
    {
      store: h.rolloutStore,
      nodes: () => [{ name: "cam-1", labels: {} }],
      online: () => true,
      updates: h.updates,
      hasRelease: async (v) => (await h.releases.list()).some((r) => r.version === v),
      changed: (n) => changed.push(n),
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
    updates: { updates: h.updates, changed: (n: string) => changed.push(n) },
  } as unknown as ApiDeps;
  const call = (method: string, path: string, token: string | undefined, body?: unknown) =>
    handleApi(
      deps,
      new Request(`http://hub${path}`, {
        method,
        headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      }),
      "10.0.0.9",
    );
  return { h, call, changed, agentRollouts, op: h.operatorToken ?? "" };
}

const PATH = "/api/v1/nodes/cam-1/update";

describe("PUT /api/v1/nodes/<name>/update", () => {
  test("a device's credential is refused (403), no token is 401, and nothing is set", async () => {
    const { h, call, changed } = await api();
    const dev = await call("PUT", PATH, h.credential, { version: "0.2.0" });
    expect(dev.status).toBe(403);
    expect(await dev.text()).toContain("cannot use the operator API");
    expect((await call("DELETE", PATH, h.credential)).status).toBe(403);
    expect((await call("PUT", PATH, undefined, { version: "0.2.0" })).status).toBe(401);
    expect(h.updates.wantedFor("cam-1")).toBeUndefined();
    expect(changed).toEqual([]);
  });

  test("the operator sets it: 200 with the node's update, audited, offered at once", async () => {
    const { h, call, changed, op } = await api();
    const res = await call("PUT", PATH, op, { version: "0.2.0" });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ node: "cam-1", wanted: "0.2.0", arch: "arm64" });
    expect(changed).toEqual(["cam-1"]);
    expect(
      (await h.audit.list()).map((r) => [r.kind, r.action, r.node, r.release, r.outcome]),
    ).toEqual([["update", "set", "cam-1", "0.2.0", "set"]]);
  });

  test.each([
    ["no version", {}, 400, "bad update"],
    ["a version that is not a string", { version: 2 }, 400, "bad update"],
    ["a version with no release", { version: "9.9.9" }, 404, "release 9.9.9 not found"],
  ])("%s is refused", async (_name, body, status, text) => {
    const { h, call, changed, op } = await api();
    const res = await call("PUT", PATH, op, body);
    expect(res.status).toBe(status);
    expect(await res.text()).toContain(text);
    expect(h.updates.wantedFor("cam-1")).toBeUndefined();
    expect(changed).toEqual([]);
  });

  test("an unknown node is 404", async () => {
    const { call, op } = await api();
    const res = await call("PUT", "/api/v1/nodes/nope/update", op, { version: "0.2.0" });
    expect(res.status).toBe(404);
    expect(await res.text()).toContain('node \\"nope\\" not found');
  });
});

describe("DELETE and GET", () => {
  test("DELETE cancels (audited); GET /api/v1/updates lists the nodes' updates", async () => {
    const { h, call, op } = await api();
    await call("PUT", PATH, op, { version: "0.2.0" });
    const list = (await (await call("GET", "/api/v1/updates", op)).json()) as { items: unknown[] };
    expect(list.items).toMatchObject([{ node: "cam-1", wanted: "0.2.0" }]);
    const del = await call("DELETE", PATH, op);
    expect(await del.json()).toEqual({ node: "cam-1", canceled: true });
    expect(h.updates.wantedFor("cam-1")).toBeUndefined();
    expect(await (await call("DELETE", PATH, op)).json()).toEqual({
      node: "cam-1",
      canceled: false,
    });
    expect((await h.audit.list()).map((r) => `${r.action} ${r.release}: ${r.outcome}`)).toEqual([
      "set 0.2.0: set",
      "cancel 0.2.0: canceled",
      "cancel : none was wanted",
    ]);
    expect((await call("GET", PATH, op)).status).toBe(200);
    expect((await call("POST", PATH, op)).status).toBe(405);
  });
});

describe("a member of an agent rollout", () => {
  test("its per-node update is refused with 409 naming the rollout (set and cancel), audited", async () => {
    const { h, call, op } = await api();
    const put = await call("PUT", "/api/v1/agentrollouts/fleet", op, { version: "0.2.0" });
    expect(put.status).toBe(201);
    expect(h.updates.wantedFor("cam-1")?.version).toBe("0.2.0");
    const set = await call("PUT", PATH, op, { version: "0.2.0" });
    expect(set.status).toBe(409);
    expect(await set.text()).toContain("node cam-1 is in agent rollout fleet");
    expect((await call("DELETE", PATH, op)).status).toBe(409);
    expect(h.updates.wantedFor("cam-1")?.version).toBe("0.2.0");
    const refused =
      "refused: node cam-1 is in agent rollout fleet: change the rollout (fleetlet hub upgrade), or delete it first";
    expect((await h.audit.list()).map((r) => [r.kind, r.action, r.outcome])).toEqual([
      ["agentrollout", "create", "created"],
      ["update", "set", refused],
      ["update", "cancel", refused],
    ]);
  });
});
