// The pod watch of the local API (GET .../pods?watch=true) through the CLI client, against a
// server whose pods the test changes by hand; time is a FakeClock, so only onPodsChanged (or a
// stepped resync) can produce an event.
import { afterEach, describe, expect, test } from "bun:test";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { FrozenJson } from "../../../src/agent/server/frozen-json.ts";
import { type ServerDeps, startAgentServer } from "../../../src/agent/server/index.ts";
import { watchPods } from "../../../src/agent/server/watch.ts";
import type { Pod } from "../../../src/api/types.ts";
import { createAgentClient, type WatchEvent } from "../../../src/cli/client.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { deepFreeze } from "../../../src/util/freeze.ts";
import { makePod } from "../../lib/builders.ts";
import { raw, tempDir } from "./fixtures.ts";

const pod = (name: string, o: { namespace?: string; phase?: string; app?: string } = {}) =>
  deepFreeze(
    makePod({
      name,
      ...(o.namespace !== undefined && { namespace: o.namespace }),
      labels: { app: o.app ?? name },
      status: { phase: (o.phase ?? "Running") as "Running" },
    }),
  );

/** A server over a pod list the test replaces; `changed()` tells the watches. */
async function startServer(initial: Pod[]) {
  const dir = await tempDir("watch");
  const socketPath = join(dir, "agent.sock");
  const clock = new FakeClock();
  const listeners = new Set<() => void>();
  const state = { pods: initial };
  const deps: ServerDeps = {
    listPods: () => state.pods,
    getPod: () => undefined,
    onPodsChanged(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    logPath: () => undefined,
    exec: () => Promise.reject(new Error("no exec here")),
    events: () => [],
    healthy: () => ({ ok: true, reasons: [] }),
    metrics: () => "",
  };
  const server = await startAgentServer(deps, { socketPath, clock, watchResyncMs: 1000 });
  return {
    state,
    clock,
    listeners,
    socketPath,
    client: createAgentClient(socketPath),
    changed: () => {
      for (const l of listeners) l();
    },
    async stop() {
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

type Server = Awaited<ReturnType<typeof startServer>>;
let server: Server | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

/** Reads events from the watch one at a time. */
function reader(events: AsyncGenerator<WatchEvent>) {
  return async (): Promise<[string, string, string | undefined]> => {
    const next = await events.next();
    if (next.done) throw new Error("the watch ended");
    const { type, object } = next.value;
    return [type, object.metadata.name, object.status?.phase];
  };
}

describe("pod watch (GET /api/v1/pods?watch=true)", () => {
  test("ADDED for each pod now, then MODIFIED, ADDED and DELETED as pods change", async () => {
    server = await startServer([pod("a"), pod("b")]);
    const abort = new AbortController();
    const next = reader(server.client.watchPods({ signal: abort.signal }));
    expect([await next(), await next()]).toEqual([
      ["ADDED", "a", "Running"],
      ["ADDED", "b", "Running"],
    ]);

    const [a, b] = server.state.pods as [Pod, Pod];
    server.state.pods = [deepFreeze({ ...a, status: { phase: "Succeeded" } }), b];
    server.changed();
    expect(await next()).toEqual(["MODIFIED", "a", "Succeeded"]);

    const first = server.state.pods[0] as Pod;
    server.state.pods = [first, pod("c")];
    server.changed();
    // The new pod first, then the pod that is gone, sent with its last state.
    expect([await next(), await next()]).toEqual([
      ["ADDED", "c", "Running"],
      ["DELETED", "b", "Running"],
    ]);
    abort.abort();
  });

  test("sends nothing for a notification when no pod object changed", async () => {
    server = await startServer([pod("a")]);
    const abort = new AbortController();
    const next = reader(server.client.watchPods({ signal: abort.signal }));
    expect(await next()).toEqual(["ADDED", "a", "Running"]);
    server.changed();
    await Bun.sleep(20);
    server.changed();
    await Bun.sleep(20);
    const [a] = server.state.pods as [Pod];
    server.state.pods = [deepFreeze({ ...a, status: { phase: "Failed" } })];
    server.changed();
    // Had the two empty notifications produced events, they would come first.
    expect(await next()).toEqual(["MODIFIED", "a", "Failed"]);
    abort.abort();
  });

  test("a change nobody announced is sent at the next resync", async () => {
    server = await startServer([pod("a")]);
    const abort = new AbortController();
    const next = reader(server.client.watchPods({ signal: abort.signal }));
    expect(await next()).toEqual(["ADDED", "a", "Running"]);
    server.state.pods = [...server.state.pods, pod("quiet")];
    const pending = next();
    await Bun.sleep(20);
    server.clock.step(1000);
    expect(await pending).toEqual(["ADDED", "quiet", "Running"]);
    abort.abort();
  });

  test("namespace and selectors choose the pods; a pod that stops matching is DELETED", async () => {
    server = await startServer([
      pod("web", { phase: "Pending" }),
      pod("db", { phase: "Pending" }),
      pod("web", { namespace: "other", phase: "Pending" }),
    ]);
    const abort = new AbortController();
    const next = reader(
      server.client.watchPods({
        namespace: "default",
        labelSelector: "app=web",
        fieldSelector: "status.phase=Pending",
        signal: abort.signal,
      }),
    );
    expect(await next()).toEqual(["ADDED", "web", "Pending"]);
    const [web, ...rest] = server.state.pods as [Pod, ...Pod[]];
    server.state.pods = [deepFreeze({ ...web, status: { phase: "Running" } }), ...rest];
    server.changed();
    expect(await next()).toEqual(["DELETED", "web", "Pending"]);
    abort.abort();
  });

  test("the client going away stops the watch's subscription", async () => {
    server = await startServer([pod("a")]);
    const abort = new AbortController();
    const next = reader(server.client.watchPods({ signal: abort.signal }));
    await next();
    expect(server.listeners.size).toBe(1);
    abort.abort();
    for (let i = 0; i < 100 && server.listeners.size > 0; i++) await Bun.sleep(10);
    expect(server.listeners.size).toBe(0);
  });

  test("with no pod to send, the watch starts with a blank line and stays open past Bun's 10 s idle timeout", async () => {
    server = await startServer([]);
    const res = await fetch("http://localhost/api/v1/pods?watch=true", {
      unix: server.socketPath,
    });
    expect(res.status).toBe(200);
    const body = (res.body as ReadableStream<Uint8Array>).getReader();
    expect(new TextDecoder().decode((await body.read()).value)).toBe("\n");
    await Bun.sleep(13_000);
    server.state.pods = [pod("late")];
    server.changed();
    const chunk = await body.read();
    expect(chunk.done).toBe(false);
    expect(JSON.parse(new TextDecoder().decode(chunk.value))).toMatchObject({
      type: "ADDED",
      object: { metadata: { name: "late" } },
    });
    await body.cancel();
  }, 25_000);

  test("timeoutSeconds ends the stream; a bad one is a 400; watch=false lists", async () => {
    server = await startServer([pod("a")]);
    const events = server.client.watchPods({ timeoutSeconds: 5 });
    const next = reader(events);
    expect(await next()).toEqual(["ADDED", "a", "Running"]);
    const end = events.next();
    await Bun.sleep(20);
    server.clock.step(5000);
    expect((await end).done).toBe(true);
    expect(server.listeners.size).toBe(0);

    const bad = await raw(server.socketPath, "/api/v1/pods?watch=true&timeoutSeconds=-1");
    expect(bad.status).toBe(400);
    expect((bad.body as { message: string }).message).toContain("timeoutSeconds must be >= 0");
    const list = await raw(server.socketPath, "/api/v1/pods?watch=false");
    expect((list.body as { kind: string }).kind).toBe("PodList");
  });
});

describe("watchPods()", () => {
  test("ends the stream of a client that leaves over 1024 events unread", async () => {
    const clock = new FakeClock();
    let n = 0;
    const listeners: (() => void)[] = [];
    const deps = {
      listPods: () => [pod(`p${n}`)],
      onPodsChanged: (l: () => void) => {
        listeners.push(l);
        return () => {};
      },
    } as unknown as ServerDeps;
    const res = watchPods(deps, () => true, {
      signal: new AbortController().signal,
      clock,
      json: new FrozenJson(),
    });
    // Each change replaces the only pod: an ADDED and a DELETED event, none of them read.
    for (n = 1; n <= 600; n++) {
      for (const l of listeners) l();
      await Promise.resolve();
    }
    const lines = (await res.text()).trim().split("\n");
    expect(lines.length).toBeGreaterThan(1024);
    expect(lines.length).toBeLessThan(1100);
    expect(JSON.parse(lines.at(-1) as string).type).toMatch(/ADDED|DELETED/);
  });
});
