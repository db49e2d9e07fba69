import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmod, lstat, mkdir, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { startAgentServer } from "../../../src/agent/server/index.ts";
import type { Event } from "../../../src/api/types.ts";
import { ApiStatusError, createAgentClient } from "../../../src/cli/client.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";
import { type FakeAgent, raw, runningStatus, startFakeAgent, tempDir } from "./fixtures.ts";

const web = makePod({
  name: "web",
  labels: { app: "web", tier: "front" },
  status: { phase: "Running", containerStatuses: [runningStatus("app")] },
});
const db = makePod({
  name: "db",
  labels: { app: "db" },
  status: { phase: "Pending", containerStatuses: [] },
});
const sys = makePod({
  name: "proxy",
  namespace: "kube-system",
  containers: [makeContainer({ name: "a" }), makeContainer({ name: "b" })],
  initContainers: [makeContainer({ name: "setup" })],
  status: { phase: "Running" },
});
const event: Event = {
  apiVersion: "v1",
  kind: "Event",
  metadata: { name: "web.17a", namespace: "default" },
  involvedObject: { kind: "Pod", namespace: "default", name: "web", uid: web.metadata.uid },
  reason: "Started",
  message: "Started container app",
  type: "Normal",
  source: { component: "fleetlet", host: "dev1" },
  count: 1,
  firstTimestamp: "2024-01-01T00:00:00Z",
  lastTimestamp: "2024-01-01T00:00:00Z",
};
const otherEvent: Event = {
  ...event,
  metadata: { name: "proxy.17b", namespace: "kube-system" },
  involvedObject: { kind: "Pod", namespace: "kube-system", name: "proxy" },
};

let agent: FakeAgent;
beforeAll(async () => {
  agent = await startFakeAgent([web, db, sys], { events: [event, otherEvent] });
});
afterAll(() => agent.stop());

const statusOf = async (p: Promise<unknown>) => {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiStatusError);
  return (err as ApiStatusError).status;
};

describe("local API server", () => {
  test("listens on a 0600 socket inside a 0700 directory it creates", async () => {
    expect((await stat(agent.socketPath)).mode & 0o777).toBe(0o600);
    expect((await stat(join(agent.dir, "run"))).mode & 0o777).toBe(0o700);
  });

  test("GET /healthz answers ok, or 503 with each failing reason", async () => {
    expect(await agent.client.healthz()).toEqual({ ok: true, body: "ok" });
    const sick = await startFakeAgent([], {
      health: { ok: false, reasons: ["PLEG is not healthy"] },
    });
    try {
      const h = await sick.client.healthz();
      expect(h.ok).toBe(false);
      expect(h.body).toBe("[-]PLEG is not healthy\nhealthz check failed\n");
    } finally {
      await sick.stop();
    }
  });

  test("GET /api/v1/pods lists pods of all namespaces as a PodList", async () => {
    const list = await agent.client.listPods();
    expect(list.kind).toBe("PodList");
    expect(list.apiVersion).toBe("v1");
    expect(list.items.map((p) => p.metadata.name)).toEqual(["web", "db", "proxy"]);
  });

  test("the namespaced pod list only holds that namespace", async () => {
    const list = await agent.client.listPods({ namespace: "kube-system" });
    expect(list.items.map((p) => p.metadata.name)).toEqual(["proxy"]);
  });

  test("labelSelector filters with =, !=, in, notin, exists and !exists", async () => {
    const names = async (labelSelector: string) =>
      (await agent.client.listPods({ labelSelector })).items.map((p) => p.metadata.name);
    expect(await names("app=web")).toEqual(["web"]);
    expect(await names("app=web,tier=front")).toEqual(["web"]);
    expect(await names("app!=web")).toEqual(["db", "proxy"]);
    expect(await names("app in (web, db)")).toEqual(["web", "db"]);
    expect(await names("app notin (web)")).toEqual(["db", "proxy"]);
    expect(await names("tier")).toEqual(["web"]);
    expect(await names("!app")).toEqual(["proxy"]);
  });

  test("fieldSelector filters on status.phase and metadata.name", async () => {
    const names = async (fieldSelector: string) =>
      (await agent.client.listPods({ fieldSelector })).items.map((p) => p.metadata.name);
    expect(await names("status.phase=Running")).toEqual(["web", "proxy"]);
    expect(await names("status.phase!=Running")).toEqual(["db"]);
    expect(await names("metadata.name==db")).toEqual(["db"]);
  });

  test("a bad selector is a 400 Status naming it", async () => {
    const bad = await statusOf(agent.client.listPods({ fieldSelector: "spec.foo=1" }));
    expect(bad).toMatchObject({ reason: "BadRequest", code: 400 });
    expect(bad.message).toBe("field label not supported: spec.foo");
    const badLabel = await statusOf(agent.client.listPods({ labelSelector: "app=we b" }));
    expect(badLabel.message).toContain('invalid label value "we b"');
  });

  test("GET a pod returns it; a missing one is a Kubernetes NotFound Status", async () => {
    expect((await agent.client.getPod("default", "web")).metadata.uid).toBe(web.metadata.uid);
    const res = await raw(agent.socketPath, "/api/v1/namespaces/default/pods/nope");
    expect(res.status).toBe(404);
    expect(res.body).toEqual({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: 'pods "nope" not found',
      reason: "NotFound",
      details: { name: "nope", kind: "pods" },
      code: 404,
    });
    const err = await agent.client.getPod("default", "nope").catch((e: Error) => e);
    expect((err as Error).message).toBe('Error from server (NotFound): pods "nope" not found');
  });

  test("an unknown path is 404 and a wrong method 405, both as Status", async () => {
    const unknown = await raw(agent.socketPath, "/api/v1/secrets");
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ kind: "Status", reason: "NotFound" });
    const method = await raw(agent.socketPath, "/api/v1/pods", { method: "DELETE" });
    expect(method.status).toBe(405);
    expect(method.body).toMatchObject({ kind: "Status", reason: "MethodNotAllowed", code: 405 });
  });

  test("GET /api/v1/events lists events, filtered by involvedObject.name or namespace", async () => {
    expect((await agent.client.listEvents()).items).toHaveLength(2);
    const list = await agent.client.listEvents({ fieldSelector: "involvedObject.name=web" });
    expect(list.kind).toBe("EventList");
    expect(list.items.map((e) => e.metadata.name)).toEqual(["web.17a"]);
    const ns = await agent.client.listEvents({ namespace: "kube-system" });
    expect(ns.items.map((e) => e.metadata.name)).toEqual(["proxy.17b"]);
    expect(await agent.client.podEvents(web)).toHaveLength(1);
  });

  test("GET /metrics serves the Prometheus text format", async () => {
    const res = await raw(agent.socketPath, "/metrics");
    expect(res.contentType).toContain("text/plain; version=0.0.4");
    expect(await agent.client.metrics()).toContain("up 1\n");
  });

  test("exec runs the command in the only container and returns its output and exit code", async () => {
    const r = await agent.client.exec("default", "web", {
      command: ["false", "x"],
      timeoutSeconds: 5,
    });
    expect(r).toEqual({ stdout: "ran false x\n", stderr: "warn\n", exitCode: 1 });
    expect(agent.execCalls.at(-1)).toEqual({
      pod: "web",
      container: "app",
      cmd: ["false", "x"],
      timeoutSec: 5,
    });
  });

  test("exec refuses a missing command, a missing container choice, and reports exec failures", async () => {
    const empty = await raw(agent.socketPath, "/api/v1/namespaces/default/pods/web/exec", {
      method: "POST",
      body: JSON.stringify({ command: [] }),
    });
    expect(empty.status).toBe(400);
    expect(empty.body).toMatchObject({
      message: "exec command must be a non-empty array of strings, got []",
    });
    const notJson = await raw(agent.socketPath, "/api/v1/namespaces/default/pods/web/exec", {
      method: "POST",
      body: "{",
    });
    expect(notJson.status).toBe(400);
    const choose = await statusOf(agent.client.exec("kube-system", "proxy", { command: ["ls"] }));
    expect(choose.message).toBe(
      "a container name must be specified for pod proxy, choose one of: [a b] or one of the init containers: [setup]",
    );
    const failed = await statusOf(agent.client.exec("default", "web", { command: ["fail"] }));
    expect(failed).toMatchObject({ reason: "InternalError", code: 500 });
    expect(failed.message).toContain('container "app" is not running');
  });
});

describe("startAgentServer()", () => {
  test("replaces a stale socket file left by a dead agent", async () => {
    const dir = await tempDir("stale");
    const socketPath = join(dir, "agent.sock");
    const child = Bun.spawn([
      process.execPath,
      "-e",
      `Bun.listen({ unix: ${JSON.stringify(socketPath)}, socket: { data() {} } }); process.kill(process.pid, "SIGKILL");`,
    ]);
    await child.exited;
    expect((await lstat(socketPath)).isSocket()).toBe(true);
    const server = await startAgentServer(agent.deps, { socketPath });
    try {
      expect((await createAgentClient(socketPath).healthz()).ok).toBe(true);
      expect((await stat(socketPath)).mode & 0o777).toBe(0o600);
    } finally {
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });

  test("refuses to replace a socket another agent is serving, or a path that is not a socket", async () => {
    await expect(startAgentServer(agent.deps, { socketPath: agent.socketPath })).rejects.toThrow(
      `cannot listen on ${agent.socketPath}: another agent is serving on that socket`,
    );
    const dir = await tempDir("notsock");
    const file = join(dir, "agent.sock");
    await writeFile(file, "x");
    await expect(startAgentServer(agent.deps, { socketPath: file })).rejects.toThrow(
      "the path exists and is not a socket",
    );
    await rm(dir, { recursive: true, force: true });
  });

  test("the client names the socket when no agent is listening", async () => {
    const dir = await tempDir("none");
    await mkdir(join(dir, "x"));
    await chmod(join(dir, "x"), 0o700);
    const client = createAgentClient(join(dir, "x", "agent.sock"));
    await expect(client.listPods()).rejects.toThrow(
      `cannot reach the fleetlet agent at ${join(dir, "x", "agent.sock")}: is \`fleetlet agent\` running?`,
    );
    await rm(dir, { recursive: true, force: true });
  });
});
