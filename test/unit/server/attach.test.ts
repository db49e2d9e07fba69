// The local API's attach (.../pods/NAME/attach, a WebSocket with the remote-command protocol)
// over a fake stream opener, and the device's attach handler over a fake CRI.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { type AgentServer, startAgentServer } from "../../../src/agent/server/index.ts";
import { createStreamOpener } from "../../../src/agent/streams/handlers.ts";
import type { AttachRequest } from "../../../src/cri/requests.ts";
import { RC } from "../../../src/protocol/remotecommand.ts";
import type { StreamOpen } from "../../../src/protocol/streams.ts";
import { StreamFailure } from "../../../src/streams/types.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { connectWebSocket, WsHandshakeError } from "../../../src/util/ws-client.ts";
import { makeContainer, makePod } from "../../lib/builders.ts";
import { type FakeAgent, raw, runningStatus, startFakeAgent } from "./fixtures.ts";

const web = makePod({
  name: "web",
  containers: [
    makeContainer({ name: "shell", stdin: true, tty: true }),
    makeContainer({ name: "ticker" }),
  ],
  status: {
    phase: "Running",
    containerStatuses: [
      runningStatus("shell"),
      runningStatus("ticker", { state: { terminated: { exitCode: 0, reason: "Completed" } } }),
    ],
  },
});

let agent: FakeAgent;
let streaming: AgentServer;
let socket: string;
const opened: StreamOpen[] = [];
beforeAll(async () => {
  agent = await startFakeAgent([web]);
  socket = join(agent.dir, "run", "streams.sock");
  streaming = await startAgentServer(agent.deps, {
    socketPath: socket,
    streams: async (req, out) => {
      opened.push(req);
      queueMicrotask(async () => {
        await out.write(1, new TextEncoder().encode("hello"));
        out.end({ exitCode: 0 });
      });
      return {};
    },
  });
});
afterAll(async () => {
  await streaming.stop();
  await agent.stop();
});

const attachUrl = (query: string) =>
  `ws://localhost/api/v1/namespaces/default/pods/web/attach?${query}`;

describe("local API attach", () => {
  test("upgrades to the remote-command protocol, opens an attach stream and ends with Success", async () => {
    const ws = await connectWebSocket({
      url: attachUrl("container=shell&stdin=true&stdout=true&tty=true"),
      unixPath: socket,
      protocols: ["v5.channel.k8s.io"],
    });
    const got: { channel: number; text: string }[] = [];
    await new Promise<void>((resolve) => {
      ws.onMessage((d) =>
        got.push({ channel: d[0] as number, text: Buffer.from(d.subarray(1)).toString() }),
      );
      ws.onClose(() => resolve());
    });
    expect(ws.protocol).toBe("v5.channel.k8s.io");
    expect(got[0]).toEqual({ channel: RC.stdout, text: "hello" });
    expect(JSON.parse(got[1]?.text ?? "")).toEqual({ metadata: {}, status: "Success" });
    expect(opened.at(-1)).toMatchObject({
      kind: "attach",
      pod: "web",
      container: "shell",
      stdin: true,
      tty: true,
      stderr: false,
    });
  });

  test("refuses -i to a container without stdin before upgrading, with a Status", async () => {
    const err = await connectWebSocket({
      url: attachUrl("container=ticker&stdin=true"),
      unixPath: socket,
      protocols: ["v5.channel.k8s.io"],
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WsHandshakeError);
    expect((err as WsHandshakeError).status).toBe(400);
    expect(JSON.parse((err as WsHandshakeError).body).message).toBe(
      "container ticker of pod web has no stdin to attach to (its spec does not set stdin: true)",
    );
  });

  test("answers a plain request with 400, and a server without streams does not serve attach", async () => {
    const plain = await raw(socket, "/api/v1/namespaces/default/pods/web/attach?container=shell");
    expect(plain.status).toBe(400);
    expect((plain.body as { message: string }).message).toBe(
      "attach needs a WebSocket upgrade with the remote-command protocol",
    );
    const none = await raw(
      agent.socketPath,
      "/api/v1/namespaces/default/pods/web/attach?container=shell",
    );
    expect(none.status).toBe(404);
  });
});

describe("the device's attach handler", () => {
  const calls: AttachRequest[] = [];
  const open = createStreamOpener({
    pod: (ns, name) => (ns === "default" && name === "web" ? web : undefined),
    logPath: () => undefined,
    cri: {
      attach: async (r: AttachRequest) => {
        calls.push(r);
        throw new Error("attach refused by the runtime");
      },
    } as never,
    log: nullLogger,
    clock: new FakeClock(0),
  });
  const req = (container: string, o: Partial<StreamOpen> = {}) =>
    ({
      type: "stream.open",
      kind: "attach",
      id: 1,
      window: 0,
      namespace: "default",
      pod: "web",
      container,
      ...o,
    }) as StreamOpen;
  const sink = { write: async () => {}, end: () => {} };
  const failureOf = (r: StreamOpen) =>
    open(r, sink, new AbortController().signal).then(
      () => undefined,
      (e: unknown) => e as StreamFailure,
    );

  test("asks CRI Attach for the running container's id with the streams of the request", async () => {
    const err = await failureOf(req("shell", { stdin: true, tty: true, stderr: true } as never));
    expect(calls).toEqual([
      { containerId: "shell-id", stdin: true, stdout: true, stderr: false, tty: true },
    ]);
    expect(err).toBeInstanceOf(StreamFailure);
    expect([err?.code, err?.message]).toEqual([500, "attach refused by the runtime"]);
  });

  test("refuses a container that is not running, and a pod it does not run", async () => {
    const stopped = await failureOf(req("ticker"));
    expect([stopped?.code, stopped?.message]).toEqual([
      400,
      "container ticker is not running in pod web",
    ]);
    const gone = await failureOf({ ...req("shell"), pod: "other" });
    expect([gone?.code, gone?.message]).toEqual([404, 'pods "other" not found']);
    expect(calls.length).toBe(1);
  });
});
