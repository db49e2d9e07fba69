// Properties of the agent ↔ hub protocol under hostile input, both ways: decoding gives a message
// (that encodes and decodes to itself) or a refusal with a known code and a bounded reason naming
// the message and field; the hub's sessions (with a stream open) and the agent's router never
// throw, refuse with the close code of the error, change no state on a refused message, send
// only messages that decode, and keep serving the other connections.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { DesiredReports } from "../../../src/agent/hubclient/desired.ts";
import { type HubMessageHandlers, routeHubFrame } from "../../../src/agent/hubclient/router.ts";
import { createHubPodSource } from "../../../src/agent/sources/index.ts";
import { Identity } from "../../../src/hub/identity.ts";
import { AgentSessions, type AgentSocket } from "../../../src/hub/sessions.ts";
import { SqliteHubStore } from "../../../src/hub/store-sqlite.ts";
import { StreamBroker } from "../../../src/hub/streams/broker.ts";
import type { Decoded } from "../../../src/protocol/decode.ts";
import {
  CLOSE_CODES,
  decodeAgentMessage,
  decodeHubMessage,
  type ErrorCode,
} from "../../../src/protocol/index.ts";
import {
  decodeChannel,
  REMOTE_COMMAND_PROTOCOLS,
  readStatus,
} from "../../../src/protocol/remotecommand.ts";
import {
  decodeAgentStreamMessage,
  decodeFrame,
  decodeHubStreamMessage,
  encodeFrame,
} from "../../../src/protocol/streams.ts";
import { FakeClock } from "../../../src/util/clock.ts";
import { nullLogger } from "../../../src/util/log.ts";
import { fuzz } from "../../lib/fuzz.ts";
import { testFleet } from "../../lib/hub-fleet.ts";
import { agentMessage, helloOf, hubMessage, validDesired } from "./hub-messages.ts";
import { brokenText, type Json, nearValidText } from "./json-mutations.ts";

const codes = Object.keys(CLOSE_CODES) as ErrorCode[];

/** A frame as a WebSocket delivers it: text, or bytes (random, or a data frame's shape). */
function frames(valid: fc.Arbitrary<Json>): fc.Arbitrary<string | Uint8Array> {
  return fc.oneof(
    { weight: 6, arbitrary: nearValidText(valid) },
    { weight: 2, arbitrary: brokenText(valid) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 3 }), fc.nat(40_000))
        .map(([id, ch, n]) => encodeFrame(id, ch, new Uint8Array(n))),
    },
  );
}

/** Checks a decode result: a message that round-trips, or a refusal of a known shape. */
function checkDecoded<M>(d: Decoded<M>, again: (text: string) => Decoded<M>): void {
  if (d.ok) {
    const back = again(JSON.stringify(d.message));
    expect(back).toEqual({ ok: true, message: d.message });
    return;
  }
  expect(codes).toContain(d.code);
  expect(d.reason.length).toBeGreaterThan(0);
  expect(d.reason.length).toBeLessThan(2048);
  if (d.type !== undefined) expect(d.reason).toStartWith(`bad ${d.type} message: `);
}

describe("protocol decoding under hostile frames", () => {
  test("decodeAgentMessage() gives a message that round-trips or a refusal naming the field", async () => {
    await fuzz(
      "hub-protocol agent messages",
      frames(agentMessage(5)),
      (data) => checkDecoded(decodeAgentMessage(data), (t) => decodeAgentMessage(t)),
      { seed: 30_801, runs: 300 },
    );
  });

  test("decodeHubMessage() gives a message that round-trips or a refusal naming the field", async () => {
    await fuzz(
      "hub-protocol hub messages",
      frames(hubMessage),
      (data) => checkDecoded(decodeHubMessage(data), (t) => decodeHubMessage(t)),
      { seed: 30_802, runs: 300 },
    );
  });

  test("stream messages and data frames decode or are refused with their stream's id", async () => {
    const streamish = fc.oneof(nearValidText(hubMessage), nearValidText(agentMessage(1)));
    await fuzz(
      "hub-protocol stream messages",
      fc.tuple(streamish, fc.uint8Array({ maxLength: 80 }), fc.nat(2000)),
      ([text, bytes, max]) => {
        let value: unknown;
        try {
          value = JSON.parse(text);
        } catch {
          return;
        }
        if (typeof value !== "object" || value === null || Array.isArray(value)) return;
        for (const d of [
          decodeHubStreamMessage(value as Record<string, unknown>),
          decodeAgentStreamMessage(value as Record<string, unknown>),
        ]) {
          if (d.ok) expect(d.message.type).toStartWith("stream.");
          else {
            expect(d.reason).toMatch(/^bad .* message: /);
            if (d.id !== undefined) expect(Number.isInteger(d.id) && d.id > 0).toBe(true);
          }
        }
        const f = decodeFrame(bytes, max);
        if (f.ok) {
          expect(f.payload.length).toBeGreaterThan(0);
          expect(f.payload.length).toBeLessThanOrEqual(max);
          expect(bytes[0]).toBe(1);
        } else expect(f.reason.length).toBeGreaterThan(0);
      },
      { seed: 30_803, runs: 300 },
    );
  });

  test("remote-command channels and error Statuses decode without throwing", async () => {
    const statusText = fc.oneof(
      fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v)),
      fc.constantFrom("null", "[]", '{"details":null}', '{"details":{"causes":null}}'),
      fc.constantFrom('{"details":{"causes":[null]}}', '{"reason":"NonZeroExitCode"}'),
      fc.string({ maxLength: 40 }),
    );
    await fuzz(
      "hub-protocol remote-command",
      fc.tuple(
        fc.constantFrom(...REMOTE_COMMAND_PROTOCOLS),
        fc.oneof(fc.string({ maxLength: 40 }), fc.uint8Array({ maxLength: 40 })),
        statusText,
      ),
      ([p, msg, status]) => {
        const c = decodeChannel(p, msg);
        if (c !== undefined) expect(Number.isInteger(c.channel)).toBe(true);
        const s = readStatus(Buffer.from(status));
        if ("exitCode" in s) expect(Number.isSafeInteger(s.exitCode)).toBe(true);
        else expect(typeof s.error).toBe("string");
      },
      { seed: 30_804, runs: 400 },
    );
  });
});

/** The hub's sessions over a fleet in memory, with two joined nodes and a stream broker. */
async function hub() {
  const clock = new FakeClock();
  const store = new SqliteHubStore(":memory:");
  const loaded = await store.load();
  const fleet = testFleet(store, loaded, clock);
  const identity = new Identity({ store, nodes: fleet.nodes }, loaded);
  const credential = async (node: string) => {
    const tok = await identity.createJoinToken(60_000, {}, clock.now());
    return (await identity.join({ joinToken: tok.token, nodeName: node }, clock.now())).credential;
  };
  const creds = { "cam-1": await credential("cam-1"), "cam-2": await credential("cam-2") };
  let sessions: AgentSessions | undefined;
  const broker = new StreamBroker({
    log: nullLogger,
    connection: (node) => sessions?.connection(node),
    windowBytes: 4096,
    maxFrameBytes: 1024,
  });
  sessions = new AgentSessions({
    fleet,
    identity,
    clock,
    log: nullLogger,
    heartbeatIntervalMs: 10_000,
    maxMessageBytes: 1 << 20,
    rateLimit: { messagesPerSecond: 1e6, burst: 1e6 },
    helloTimeoutMs: 5000,
    markDirty: () => {},
    flushNow: () => {},
    broker,
  });
  return { fleet, sessions, broker, creds };
}

type Hub = Awaited<ReturnType<typeof hub>>;

/** A connection of `node` past hello: what it was sent, and how it was closed. */
function connect(h: Hub, node: "cam-1" | "cam-2") {
  const sent: (string | Uint8Array)[] = [];
  const ws: AgentSocket & { closedWith?: number } = {
    data: h.sessions.newData(h.creds[node], true),
    send: (d) => sent.push(d),
    close(code) {
      this.closedWith = code;
    },
    getBufferedAmount: () => 0,
  };
  h.sessions.open(ws);
  h.sessions.message(ws, JSON.stringify(helloOf(node)));
  expect(ws.data.nodeName).toBe(node);
  return { ws, sent };
}

/** What a refused message must leave as it was (lastSeen aside: the hub heard from the node). */
function snapshot(h: Hub) {
  const rec = h.fleet.nodes.get("cam-1");
  return JSON.stringify({
    node: rec?.node,
    pods: h.fleet.allPods(),
    events: h.fleet.allEvents(),
    received: h.fleet.receivedSeq("cam-1"),
    desired: h.fleet.desiredReport("cam-1"),
    generation: rec?.ackedGeneration,
  });
}

describe("the hub's sessions under hostile agent frames", () => {
  test("never throw, refuse with the error's close code, change nothing when refusing, keep serving others", async () => {
    const h = await hub();
    const other = connect(h, "cam-2");
    let seq = 1;
    await fuzz(
      "hub-protocol hub sessions",
      fc.array(frames(agentMessage(1)), { minLength: 1, maxLength: 4 }),
      async (list) => {
        const { ws, sent } = connect(h, "cam-1");
        const ended = h.broker
          .opener("cam-1")(
            {
              type: "stream.open",
              kind: "exec",
              id: 0,
              window: 0,
              namespace: "default",
              pod: "web",
              command: ["sh"],
            },
            { write: async () => {}, end: () => {} },
            new AbortController().signal,
          )
          .catch(() => {});
        for (const frame of list) {
          const text =
            typeof frame === "string" ? frame.replace(/"seq":1\b/, `"seq":${++seq}`) : frame;
          const before = snapshot(h);
          const count = sent.length;
          h.sessions.message(ws, text);
          const errors = sent.slice(count).flatMap((m) => {
            if (typeof m !== "string") return [];
            const d = decodeHubMessage(m);
            if (!d.ok) expect(decodeHubStreamMessage(JSON.parse(m)).ok).toBe(true);
            return d.ok && d.message.type === "error" ? [d.message] : [];
          });
          if (errors.length > 0) {
            const e = errors[0] as { code: ErrorCode };
            expect(ws.closedWith).toBe(CLOSE_CODES[e.code]);
            expect(snapshot(h)).toBe(before);
            break;
          }
        }
        h.sessions.close(ws);
        await ended;
        const heard = other.sent.length;
        h.sessions.message(other.ws, '{"type":"hb"}');
        expect(other.sent.slice(heard)).toEqual(['{"type":"hb"}']);
        expect(other.ws.closedWith).toBeUndefined();
      },
      { seed: 30_805, runs: 200 },
    );
  });
});

/** Handlers that record what they were given. */
function recorder() {
  const calls: { kind: string; value: unknown }[] = [];
  const rec = (kind: string) => (value: unknown) => void calls.push({ kind, value });
  const h: HubMessageHandlers = {
    welcome: rec("welcome"),
    ack: rec("ack"),
    desired: rec("desired"),
    error: rec("error"),
    other: rec("other"),
    extension: {
      owns: (t) => t.startsWith("stream."),
      text: rec("stream"),
      binary: rec("binary"),
    },
    refuse: (code, reason) => void calls.push({ kind: "refuse", value: { code, reason } }),
  };
  return { calls, h };
}

describe("the agent's routing of hostile hub frames", () => {
  test("never throws, hands each frame to one handler, and a refused one to none", async () => {
    const closeCodes = new Set(Object.values(CLOSE_CODES));
    await fuzz(
      "hub-protocol agent router",
      fc.tuple(frames(hubMessage), fc.boolean()),
      ([data, welcomed]) => {
        const { calls, h } = recorder();
        routeHubFrame(data, welcomed, h, nullLogger);
        expect(calls.length).toBe(1);
        const call = calls[0] as { kind: string; value: unknown };
        if (call.kind === "refuse") {
          const { code, reason } = call.value as { code: number; reason: string };
          expect(closeCodes.has(code)).toBe(true);
          expect(reason.length).toBeLessThanOrEqual(120);
        } else if (call.kind === "desired") {
          const d = call.value as { ok: boolean; reason?: string; generation?: unknown };
          if (!d.ok) {
            expect(welcomed).toBe(true);
            expect(d.reason).toStartWith("bad desired message: ");
          }
        } else if (call.kind === "binary" || call.kind === "stream") expect(welcomed).toBe(true);
      },
      { seed: 30_806, runs: 400 },
    );
  });
});

/** The agent's desired state (the "api" pod source on a saved file) behind its reports. */
function agentDesired() {
  const dir = mkdtempSync(join(tmpdir(), "fleetlet-fuzz-desired-"));
  const path = join(dir, "hub", "desired.json");
  let applied = 0;
  const source = createHubPodSource({
    nodeName: "cam-1",
    path,
    log: nullLogger,
    apply: () => void applied++,
    applyObjects: () => void applied++,
  });
  const reports = new DesiredReports({
    handler: {
      get generation() {
        return source.generation;
      },
      accept: (input) => source.accept(input),
      conflicts: () => [],
    },
    log: nullLogger,
    nodeEvent: () => {},
  });
  const saved = () => {
    try {
      return readFileSync(path, "utf8");
    } catch {
      return "";
    }
  };
  return {
    reports,
    saved,
    applied: () => applied,
    cleanup: () => rmSync(dir, { recursive: true }),
  };
}

describe("the agent's desired state under hostile desired messages", () => {
  test("takes a valid one whole, and keeps its pods, objects and saved file on a refused one", async () => {
    const a = agentDesired();
    let generation = 10;
    try {
      await fuzz(
        "hub-protocol agent desired state",
        nearValidText(validDesired),
        (text) => {
          const frame = text.replace(/"generation":7\b/, `"generation":${++generation}`);
          const [before, applied, held] = [a.saved(), a.applied(), a.reports.report().generation];
          let ack: ReturnType<DesiredReports["take"]> | undefined;
          const h = recorder().h;
          h.desired = (d) => {
            ack = a.reports.take(d, "ws://127.0.0.1:1/api/v1/agent/connect");
          };
          routeHubFrame(frame, true, h, nullLogger);
          if (ack === undefined) return;
          if (ack.refused !== undefined && ack.generation === held) {
            expect(a.saved()).toBe(before);
            expect(a.applied()).toBe(applied);
          } else if (ack.generation !== held) {
            expect(ack.refused).toBeUndefined();
            expect(JSON.parse(a.saved()).generation).toBe(ack.generation);
            expect(a.applied()).toBeGreaterThan(applied);
          }
        },
        { seed: 30_807, runs: 80 },
      );
    } finally {
      a.cleanup();
    }
  });
});
