// The agent's stream multiplexing alone: a fake connection, a fake opener, a fake clock.
import { describe, expect, test } from "bun:test";
import { type MuxConnection, StreamMux } from "../../../src/agent/streams/mux.ts";
import {
  decodeFrame,
  encodeFrame,
  STREAM_LOW_WATER,
  type StreamOpen,
} from "../../../src/protocol/streams.ts";
import { type OpenStream, StreamFailure, type StreamOutput } from "../../../src/streams/types.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";

function fakeConn(clock: FakeClock) {
  const text: Record<string, unknown>[] = [];
  const frames: { id: number; channel: number; data: string }[] = [];
  let buffered = 0;
  const conn: MuxConnection = {
    send(d) {
      if (typeof d === "string") text.push(JSON.parse(d));
      else {
        const f = decodeFrame(d, 1 << 20);
        if (f.ok)
          frames.push({ id: f.id, channel: f.channel, data: Buffer.from(f.payload).toString() });
      }
      return true;
    },
    buffered: () => buffered,
    setTimer: (ms, fn) => clock.setTimer(ms, fn),
  };
  return { conn, text, frames, setBuffered: (n: number) => (buffered = n) };
}

const openReq = (id: number, window = 1000, kind: "logs" | "exec" = "exec"): StreamOpen =>
  kind === "exec"
    ? {
        type: "stream.open",
        kind,
        id,
        window,
        namespace: "default",
        pod: "web",
        command: ["sh"],
        stdin: true,
      }
    : { type: "stream.open", kind, id, window, namespace: "default", pod: "web" };

function setup(open: OpenStream, maxStreams = 4) {
  const clock = new FakeClock();
  const c = fakeConn(clock);
  const mux = new StreamMux({ conn: c.conn, log: nullLogger, open, maxStreams });
  mux.welcomed({
    type: "welcome",
    protocolVersion: 1,
    heartbeatIntervalMs: 1000,
    ackedSeq: 0,
    maxMessageBytes: 1 << 20,
    rateLimit: { messagesPerSecond: 10, burst: 10 },
    streams: { maxStreams: 8, windowBytes: 4096, maxFrameBytes: 4096 },
  });
  return { clock, mux, ...c };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

describe("StreamMux", () => {
  test("opens a stream's work, says ready with its window, and sends output within the hub's credit", async () => {
    let out!: StreamOutput;
    const { mux, text, frames } = setup(async (_r, o) => {
      out = o;
      return {};
    });
    mux.text(openReq(1, 5) as never);
    await tick();
    expect(text).toEqual([{ type: "stream.ready", id: 1, window: 4096 }]);
    const written = out.write(1, new TextEncoder().encode("hello world"));
    expect(frames).toEqual([{ id: 1, channel: 1, data: "hello" }]);
    mux.text({ type: "stream.window", id: 1, bytes: 100 });
    await written;
    expect(frames.map((f) => f.data).join("")).toBe("hello world");
    out.end({ exitCode: 3 });
    expect(text.at(-1)).toEqual({ type: "stream.close", id: 1, exitCode: 3 });
  });

  test("holds data while the socket is full and sends it when it drains (status first)", async () => {
    let out!: StreamOutput;
    const { mux, frames, clock, setBuffered } = setup(async (_r, o) => {
      out = o;
      return {};
    });
    mux.text(openReq(1) as never);
    await tick();
    setBuffered(STREAM_LOW_WATER);
    void out.write(1, new TextEncoder().encode("x"));
    expect(frames).toEqual([]);
    setBuffered(0);
    clock.step(2);
    expect(frames.map((f) => f.data)).toEqual(["x"]);
  });

  test("refuses a stream over the device's cap with 429, and a failed open with its reason", async () => {
    const { mux, text } = setup(async (r) => {
      if (r.pod === "gone") throw new StreamFailure(404, "NotFound", 'pods "gone" not found');
      return {};
    }, 1);
    mux.text(openReq(1) as never);
    mux.text(openReq(2) as never);
    await tick();
    expect(text).toContainEqual(
      expect.objectContaining({
        type: "stream.close",
        id: 2,
        error: expect.objectContaining({ code: 429 }),
      }),
    );
    mux.text({ type: "stream.close", id: 1 });
    mux.text({ ...openReq(3), pod: "gone" } as never);
    await tick();
    expect(text.at(-1)).toEqual({
      type: "stream.close",
      id: 3,
      error: { code: 404, reason: "NotFound", message: 'pods "gone" not found' },
    });
  });

  test("a bad frame ends its stream only; input is passed on and its credit given back once passed", async () => {
    const inputs: string[] = [];
    const signals: AbortSignal[] = [];
    const held: (() => void)[] = [];
    const { mux, text } = setup(async (_r, _o, signal) => {
      signals.push(signal);
      return {
        input: (_c, d) => {
          inputs.push(Buffer.from(d).toString());
          return new Promise<void>((resolve) => held.push(resolve));
        },
      };
    });
    mux.text(openReq(1) as never);
    mux.text(openReq(2) as never);
    await tick();
    mux.binary(encodeFrame(2, 0, new TextEncoder().encode("ok")));
    mux.binary(encodeFrame(1, 7, new TextEncoder().encode("bad channel")));
    mux.binary(Uint8Array.of(1, 0, 0));
    expect(inputs).toEqual(["ok"]);
    expect(signals.map((s) => s.aborted)).toEqual([true, false]);
    expect(text).toContainEqual(
      expect.objectContaining({
        type: "stream.close",
        id: 1,
        error: expect.objectContaining({ code: 400 }),
      }),
    );
    mux.binary(encodeFrame(2, 0, new Uint8Array(1100)));
    expect(text.filter((m) => m.type === "stream.window")).toEqual([]);
    for (const h of held.splice(0)) h();
    await tick();
    expect(text.at(-1)).toEqual({ type: "stream.window", id: 2, bytes: 1102 });
    mux.binary(encodeFrame(2, 0, new Uint8Array(4096)));
    mux.binary(encodeFrame(2, 0, new Uint8Array(10)));
    expect(text.at(-1)).toEqual(
      expect.objectContaining({
        type: "stream.close",
        id: 2,
        error: expect.objectContaining({ message: expect.stringContaining("credit") }),
      }),
    );
  });

  test("stops the work when the hub closes the stream, and every stream when the session ends", async () => {
    const signals: AbortSignal[] = [];
    const { mux } = setup(async (_r, _o, signal) => {
      signals.push(signal);
      return {};
    });
    mux.text(openReq(1) as never);
    mux.text(openReq(2) as never);
    await tick();
    mux.text({ type: "stream.close", id: 1 });
    expect(signals.map((s) => s.aborted)).toEqual([true, false]);
    mux.ended();
    expect(signals.map((s) => s.aborted)).toEqual([true, true]);
    expect(mux.count()).toBe(0);
  });
});
