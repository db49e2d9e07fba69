import { describe, expect, test } from "bun:test";
import {
  decodeAgentMessage,
  decodeHubMessage,
  PROTOCOL_VERSION,
} from "../../../src/protocol/index.ts";
import { makePod } from "../../lib/builders.ts";

const hello = {
  type: "hello",
  protocolVersion: PROTOCOL_VERSION,
  nodeName: "cam-1",
  agentVersion: "0.1.0",
  streamId: "s1",
};
const running = makePod({
  name: "web",
  spec: { nodeName: "cam-1" },
  status: { phase: "Running", containerStatuses: [] },
});

describe("decodeAgentMessage()", () => {
  test.each([
    ["hello", hello],
    [
      "a pod upsert with status",
      { type: "pod.upsert", seq: 1, uid: running.metadata.uid, pod: running },
    ],
    ["a pod delete", { type: "pod.delete", seq: 2, uid: "u" }],
    ["a node patch", { type: "node.patch", seq: 3, status: { capacity: { cpu: "2" } } }],
    ["a heartbeat", { type: "hb" }],
    ["a desired ack", { type: "desired.ack", generation: 4 }],
  ])("accepts %s", (_what, msg) => {
    const r = decodeAgentMessage(JSON.stringify(msg));
    expect(r.ok).toBe(true);
  });

  test("drops unknown fields, so a newer agent may add optional ones", () => {
    const r = decodeAgentMessage(JSON.stringify({ ...hello, future: true }));
    expect(r).toEqual({ ok: true, message: hello as never });
  });

  test.each([
    ["not JSON", "{nope", "malformed", "not JSON"],
    ["an array", "[1]", "malformed", "not a JSON object"],
    ["no type", "{}", "malformed", 'no string "type"'],
    [
      "an unknown type",
      '{"type":"shell","cmd":"rm"}',
      "unknown-type",
      'unknown message type "shell"',
    ],
    [
      "a seq of 0",
      '{"type":"pod.delete","seq":0,"uid":"u"}',
      "malformed",
      "bad pod.delete message: seq",
    ],
    [
      "a bad phase",
      JSON.stringify({
        type: "pod.upsert",
        seq: 1,
        uid: running.metadata.uid,
        pod: { ...running, status: { phase: "Dancing" } },
      }),
      "malformed",
      "pod.status.phase",
    ],
    [
      "a uid that differs from the pod's",
      JSON.stringify({ type: "pod.upsert", seq: 1, uid: "other", pod: running }),
      "malformed",
      "pod.metadata.uid differs",
    ],
  ])("refuses %s with a reason", (_what, text, code, reason) => {
    const r = decodeAgentMessage(text);
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.code).toBe(code as never);
      expect(r.reason).toContain(reason);
    }
  });

  test("refuses a message over the size limit before parsing it", () => {
    const r = decodeAgentMessage(`{"type":"hb","pad":"${"x".repeat(2000)}"}`, 1024);
    expect(r).toMatchObject({ ok: false, code: "too-large" });
  });

  test("refuses binary frames", () => {
    const r = decodeAgentMessage(new TextEncoder().encode('{"type":"hb"}'));
    expect(r).toMatchObject({ ok: false, code: "malformed" });
  });
});

describe("decodeHubMessage()", () => {
  test("accepts welcome, ack and error", () => {
    const welcome = {
      type: "welcome",
      protocolVersion: 1,
      heartbeatIntervalMs: 10_000,
      ackedSeq: 0,
      maxMessageBytes: 1 << 20,
      rateLimit: { messagesPerSecond: 50, burst: 500 },
    };
    expect(decodeHubMessage(JSON.stringify(welcome)).ok).toBe(true);
    expect(decodeHubMessage('{"type":"ack","seq":7}').ok).toBe(true);
    expect(decodeHubMessage('{"type":"error","code":"revoked","reason":"x"}').ok).toBe(true);
  });

  test("refuses an error with an unknown code", () => {
    expect(decodeHubMessage('{"type":"error","code":"oops","reason":"x"}').ok).toBe(false);
  });
});
