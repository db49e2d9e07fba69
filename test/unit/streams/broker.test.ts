// The hub's stream broker alone: a fake agent socket, a fake client.
import { describe, expect, test } from "bun:test";
import {
  type AgentStreams,
  type BrokerSocket,
  StreamBroker,
} from "../../../src/hub/streams/broker.ts";
import type { StreamError } from "../../../src/protocol/streams.ts";
import { decodeFrame, encodeFrame, type StreamOpen } from "../../../src/protocol/streams.ts";
import { StreamFailure, type StreamWork } from "../../../src/streams/types.ts";
import { nullLogger } from "../../../src/util/log.ts";

function agent(streamsOn = true) {
  const text: Record<string, unknown>[] = [];
  const frames: { id: number; data: string }[] = [];
  const ws: BrokerSocket = {
    send(d) {
      if (typeof d === "string") text.push(JSON.parse(d));
      else {
        const f = decodeFrame(d, 1 << 20);
        if (f.ok) frames.push({ id: f.id, data: Buffer.from(f.payload).toString() });
      }
    },
    getBufferedAmount: () => 0,
  };
  const streams: AgentStreams | undefined = streamsOn ? { nextId: 1, byId: new Map() } : undefined;
  let online = true;
  const broker = new StreamBroker({
    log: nullLogger,
    connection: () => (online ? { ws, streams, agent: "fleetlet agent 0.0.1" } : undefined),
    windowBytes: 4096,
    maxFrameBytes: 1024,
    maxStreams: 2,
  });
  return { ws, streams, broker, text, frames, offline: () => (online = false) };
}

function client() {
  const got: string[] = [];
  const ends: { exitCode?: number; error?: StreamError }[] = [];
  let release: (() => void) | undefined;
  return {
    got,
    ends,
    hold: () => {
      release = undefined;
    },
    out: {
      write: (_c: number, d: Uint8Array) => {
        got.push(Buffer.from(d).toString());
        return new Promise<void>((r) => {
          release = r;
        });
      },
      end: (r: { exitCode?: number; error?: StreamError }) => void ends.push(r),
    },
    release: () => release?.(),
  };
}

const exec: StreamOpen = {
  type: "stream.open",
  kind: "exec",
  id: 0,
  window: 0,
  namespace: "default",
  pod: "web",
  command: ["sh"],
  stdin: true,
};

const tick = () => new Promise((r) => setTimeout(r, 0));

describe("StreamBroker", () => {
  test("refuses a stream to an offline device, an agent without streams, and one over the cap", async () => {
    const a = agent();
    a.offline();
    await expect(
      a.broker.opener("cam-1")(exec, client().out, new AbortController().signal),
    ).rejects.toMatchObject({
      code: 503,
      message: 'node "cam-1" is offline: its agent is not connected to the hub',
    });
    const old = agent(false);
    await expect(
      old.broker.opener("cam-1")(exec, client().out, new AbortController().signal),
    ).rejects.toThrow("cannot stream logs, exec or port-forward");
    const b = agent();
    void b.broker.opener("cam-1")(exec, client().out, new AbortController().signal);
    void b.broker.opener("cam-1")(exec, client().out, new AbortController().signal);
    await expect(
      b.broker.opener("cam-1")(exec, client().out, new AbortController().signal),
    ).rejects.toBeInstanceOf(StreamFailure);
  });

  test("opens with the broker's id and window, sends input within credit and its end after it", async () => {
    const a = agent();
    const opening = a.broker.opener("cam-1")(exec, client().out, new AbortController().signal);
    expect(a.text[0]).toMatchObject({ type: "stream.open", id: 1, window: 4096, kind: "exec" });
    a.broker.agentText(a.ws, a.streams as AgentStreams, { type: "stream.ready", id: 1, window: 3 });
    const work: StreamWork = await opening;
    void work.input?.(0, new TextEncoder().encode("hello"));
    work.eof?.();
    await tick();
    expect(a.frames).toEqual([{ id: 1, data: "hel" }]);
    expect(a.text.map((m) => m.type)).toEqual(["stream.open"]);
    a.broker.agentText(a.ws, a.streams as AgentStreams, {
      type: "stream.window",
      id: 1,
      bytes: 100,
    });
    await tick();
    await tick();
    expect(a.frames.map((f) => f.data).join("")).toBe("hello");
    expect(a.text.at(-1)).toEqual({ id: 1, type: "stream.eof" });
  });

  test("hands the device's output to the client and gives credit back once the client took it", async () => {
    const a = agent();
    const c = client();
    const opening = a.broker.opener("cam-1")(exec, c.out, new AbortController().signal);
    a.broker.agentText(a.ws, a.streams as AgentStreams, {
      type: "stream.ready",
      id: 1,
      window: 4096,
    });
    await opening;
    a.broker.agentBinary(a.ws, a.streams as AgentStreams, encodeFrame(1, 1, new Uint8Array(1024)));
    expect(c.got.length).toBe(1);
    expect(a.text.filter((m) => m.type === "stream.window")).toEqual([]);
    c.release();
    await tick();
    expect(a.text.at(-1)).toEqual({ type: "stream.window", id: 1, bytes: 1024 });
    a.broker.agentText(a.ws, a.streams as AgentStreams, {
      type: "stream.close",
      id: 1,
      exitCode: 4,
    });
    expect(c.ends).toEqual([{ exitCode: 4 }]);
  });

  test("a bad frame from the device ends that stream only, and a device going offline ends the rest", async () => {
    const a = agent();
    const c1 = client();
    const c2 = client();
    const o1 = a.broker.opener("cam-1")(exec, c1.out, new AbortController().signal);
    const o2 = a.broker.opener("cam-1")(exec, c2.out, new AbortController().signal);
    a.broker.agentText(a.ws, a.streams as AgentStreams, {
      type: "stream.ready",
      id: 1,
      window: 10,
    });
    a.broker.agentText(a.ws, a.streams as AgentStreams, {
      type: "stream.ready",
      id: 2,
      window: 10,
    });
    await Promise.all([o1, o2]);
    a.broker.agentBinary(
      a.ws,
      a.streams as AgentStreams,
      encodeFrame(1, 0, new TextEncoder().encode("stdin?")),
    );
    expect(c1.ends[0]?.error?.code).toBe(502);
    expect(a.text.at(-1)).toMatchObject({ type: "stream.close", id: 1, error: { code: 502 } });
    expect(c2.ends).toEqual([]);
    a.broker.connectionClosed(a.streams, 'node "cam-1" went offline');
    expect(c2.ends).toEqual([
      { error: { code: 503, reason: "ServiceUnavailable", message: 'node "cam-1" went offline' } },
    ]);
  });

  test("the client leaving closes the stream on the device; a stream closed before ready fails its open", async () => {
    const a = agent();
    const abort = new AbortController();
    const opening = a.broker.opener("cam-1")(exec, client().out, abort.signal);
    const failing = a.broker.opener("cam-1")(exec, client().out, new AbortController().signal);
    a.broker.agentText(a.ws, a.streams as AgentStreams, {
      type: "stream.ready",
      id: 1,
      window: 10,
    });
    await opening;
    abort.abort();
    expect(a.text.at(-1)).toEqual({ type: "stream.close", id: 1 });
    a.broker.agentText(a.ws, a.streams as AgentStreams, {
      type: "stream.close",
      id: 2,
      error: { code: 400, reason: "BadRequest", message: "container c is not valid for pod web" },
    });
    await expect(failing).rejects.toMatchObject({
      code: 400,
      message: "container c is not valid for pod web",
    });
  });
});
